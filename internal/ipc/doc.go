// Package ipc is how agents in containers ask the host for things: start a
// pipeline, cancel or query a run, post a chat message. The transport is
// plain files, because a directory is the one thing both sides of a Docker
// bind mount share without a network.
//
// Each registered group has a directory data/ipc/<group>/, mounted at
// /workspace/ipc inside that group's containers:
//
//	tasks/      start_pipeline, cancel_pipeline, pipeline_status requests
//	messages/   send_message requests
//	responses/  the host's answer to each request, responses/<request_id>.json
//	input/      host → agent follow-up prompts (used by the container runtime)
//	outcome/    agent → host results (used by the container runtime)
//
// A request is one JSON file, written to a temporary name and renamed to
// <name>.json when complete. The Watcher notices it (fsnotify, with a
// periodic rescan as a safety net), claims it by renaming it into a
// host-private directory the agent cannot see, decides who sent it from the
// directory it was found in (never from its contents), authorizes and
// rate-limits it, calls the Host, and writes the answer atomically into
// responses/. Files that are malformed or not allowed are moved to
// data/ipc/errors/<group>/ with a .reason file beside them.
//
// The agent side lives in package client (nanoagent ipc …).
package ipc
