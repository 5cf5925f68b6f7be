# The two commands of README.md: `make run` and `make test`.
.PHONY: run test vet unit conformance build

run:
	go run ./functions/local

test: vet unit conformance

vet:
	go vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)

unit:
	go test ./...

conformance:
	bash scripts/conformance/run.sh

build:
	go build ./...
