package httpapi

// filesRoutes is the route table of the Files API: the bot's files.
func (s *server) filesRoutes() []route {
	return []route{}
}
