package platform

// FileStorage holds file contents: S3 in AWS, the embedded S3 locally.
// Defined by the Files API work (issue 5).
type FileStorage interface{}
