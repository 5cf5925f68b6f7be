package platform

// Scheduler manages the schedules of bots' recurring events: EventBridge
// Scheduler in AWS, an in-process scheduler locally. Defined by the bots and
// integrations work (issue 6).
type Scheduler interface{}
