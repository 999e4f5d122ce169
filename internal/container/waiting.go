package container

// Waiting is how many agent and tool requests are waiting for a container
// slot right now (all runtime.max_containers are in use): the host reports
// it as nanohost_containers_queued.
func (b *Backend) Waiting() int { return b.slots.waiting() }
