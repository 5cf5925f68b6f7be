// Command upload-completion is the Lambda function S3 invokes for every
// object created in the files bucket: it completes the upload of the file
// the object belongs to (shared/files.Completer).
package main

import "github.com/botforge/platform/shared/runtime"

func main() { runtime.StartUploadCompletion() }
