package capacity

// The price table of the capacity model: AWS on-demand list prices, US
// East (N. Virginia), as published in November 2026, in US dollars. The
// one place to change when prices move or a region's differ.
type Prices struct {
	// DynamoDB on demand (standard table class), per million request units.
	DynamoWriteMillion, DynamoReadMillion float64
	// DynamoDB provisioned capacity (standard table class), per capacity
	// unit and hour, billed on what is provisioned whether used or not
	// (the stack's TableCapacityMode provisioned, docs/deploy.md).
	DynamoWCUHour, DynamoRCUHour float64
	// Lambda (arm64), per GB-second and per million requests.
	LambdaGBSecond, LambdaRequestMillion float64
	// API Gateway HTTP API, per million requests (first 300 million).
	APIRequestMillion float64
	// S3 Standard, per thousand PUT and GET requests.
	S3PutThousand, S3GetThousand float64
	// CloudWatch Logs ingestion (standard), per GB.
	LogsIngestGB float64
	// Fargate (Linux/ARM, the stream tier's tasks), per vCPU-hour and per
	// GB-hour of memory.
	FargateVCPUHour, FargateGBHour float64
	// Application Load Balancer, per hour and per LCU-hour (an LCU is the
	// largest of its dimensions, ALBLCU).
	ALBHour, ALBLCUHour float64
	// Network Load Balancer, per hour and per NLCU-hour (the largest of
	// its dimensions, NLBLCU: TCP listeners).
	NLBHour, NLCUHour float64
}

// ALBLCU is what one Application Load Balancer capacity unit covers for
// an hour, per dimension (EC2, container and IP targets).
var ALBLCU = struct {
	NewConnectionsPerSecond    float64
	ActiveConnectionsPerMinute float64
	ProcessedGBPerHour         float64
	RuleEvaluationsPerSecond   float64
}{25, 3000, 1, 1000}

// NLBLCU is what one Network Load Balancer capacity unit covers for an
// hour on a TCP listener (TLS listeners: 50 new connections/s and 3,000
// active; the container tier's NLB passes TCP through, the tasks end TLS).
var NLBLCU = struct {
	NewConnectionsPerSecond float64
	ActiveConnections       float64
	ProcessedGBPerHour      float64
}{800, 100000, 1}

// OnDemand are the prices the model uses.
var OnDemand = Prices{
	DynamoWriteMillion: 0.625,
	DynamoReadMillion:  0.125,
	// Provisioned capacity, us-east-1: $0.00065 per WCU-hour, $0.00013
	// per RCU-hour (aws.amazon.com/dynamodb/pricing/provisioned; the
	// November 2024 cut halved on-demand's prices and left these as they
	// were). Checked 2026-11-29: that page's stored copy gives the units'
	// definitions (below) but not its price table, which it renders in
	// the browser; the figures are the list prices as last published,
	// to be checked there when the model is relied on. A transactional
	// write takes 2 WCU and a strongly consistent read of up to 4 KB 1
	// RCU, as on demand: the units counted are the same in both modes,
	// only their price differs.
	DynamoWCUHour:        0.00065,
	DynamoRCUHour:        0.00013,
	LambdaGBSecond:       0.0000133334,
	LambdaRequestMillion: 0.20,
	APIRequestMillion:    1.00,
	S3PutThousand:        0.005,
	S3GetThousand:        0.0004,
	LogsIngestGB:         0.50,
	// Checked 2026-11-28 (aws.amazon.com/fargate/pricing,
	// aws.amazon.com/elasticloadbalancing/pricing; unchanged through 2026).
	FargateVCPUHour: 0.03238,
	FargateGBHour:   0.00356,
	ALBHour:         0.0225,
	ALBLCUHour:      0.008,
	NLBHour:         0.0225,
	NLCUHour:        0.006,
}

// Assumptions are what the replay cannot measure: how long things take on
// AWS and how much they log. They are stated with every estimate.
type Assumptions struct {
	// APIMillis is the mean duration of an API function invocation
	// (256 MB, template.yaml), APIMemoryMB its memory.
	APIMillis, APIMemoryMB float64
	// DeliveryMillis is the mean time the dispatcher waits for a bot or
	// integration to answer one delivery; DispatcherMemoryMB its memory.
	DeliveryMillis, DispatcherMemoryMB float64
	// DeliveriesPerInvocation is how many deliveries one dispatcher
	// invocation makes (a stream batch), for the request charge.
	DeliveriesPerInvocation float64
	// LogBytesPerCall is what one API call or delivery writes to
	// CloudWatch Logs (the request log line, the delivery log line, the
	// Lambda platform's START/END/REPORT lines).
	LogBytesPerCall float64
	// FilesPerMessage are file uploads per message (a presigned PUT and
	// a read each).
	FilesPerMessage float64
	// Utilization is provisioned capacity's target utilization (0.2 to
	// 0.9, auto scaling's bounds): auto scaling keeps the provisioned
	// units at about the units used divided by it, for a steady load.
	Utilization float64
}

// DefaultAssumptions: a bot answering in 200 ms.
var DefaultAssumptions = Assumptions{
	APIMillis: 40, APIMemoryMB: 256,
	DeliveryMillis: 200, DispatcherMemoryMB: 256,
	DeliveriesPerInvocation: 4,
	LogBytesPerCall:         600,
	FilesPerMessage:         0,
	Utilization:             0.70,
}
