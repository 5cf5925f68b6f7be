package assistant_test

import (
	"errors"

	"github.com/botforge/platform/shared/assistant"
)

func asAPIError(err error, target **assistant.APIError) bool { return errors.As(err, target) }
