package agent

// features are what the agent does for the server besides keeping the
// channel: each registers its commands with Handle and its start-up with
// OnConnect. One line per feature, in the file that builds it.
func (a *Agent) features() []func(*Agent) {
	return []func(*Agent){
		registerLs,
		mappingFeature, // mapping*.go: mapped folders kept in step with their roots
		startBackups,   // backup.go, restore.go
	}
}

// Start returns an Agent for cfg with every feature registered; Run it.
func Start(cfg Config) (*Agent, error) {
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	for _, f := range a.features() {
		f(a)
	}
	return a, nil
}
