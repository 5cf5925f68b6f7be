package httpapi

// chatRoutes is the route table of the Chat API: conversations, participants,
// users, messages, events and states of the bot named by x-bot-id.
func (s *server) chatRoutes() []route {
	return []route{}
}
