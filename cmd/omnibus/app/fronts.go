package app

// startFronts starts the protocol listeners. It is filled in as the
// fronts land.
func (a *App) startFronts() error { return nil }
