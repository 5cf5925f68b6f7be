package platform

// LogStore writes and queries bot and integration log lines: CloudWatch Logs
// (Insights) in AWS, an embedded store locally. Defined by the logs work (issue 7).
type LogStore interface{}
