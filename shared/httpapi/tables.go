package httpapi

// tablesRoutes is the route table of the Tables API: the bot's tables and rows.
func (s *server) tablesRoutes() []route {
	return []route{}
}
