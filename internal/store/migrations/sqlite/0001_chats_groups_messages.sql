-- 0001: chat state — the chats the host has seen, the groups registered on
-- them, their messages, agent sessions and the IPC idempotency log.
-- Times are UTC text in a fixed-width RFC 3339 layout with nanoseconds
-- (2026-02-28T10:00:00.000000000Z): readable in the sqlite3 shell and
-- ordered correctly by plain string comparison.

CREATE TABLE chats (
    chat_id      TEXT PRIMARY KEY,              -- globally unique (channels prefix their ids if needed)
    channel      TEXT NOT NULL,                 -- 'slack', 'console', …
    name         TEXT NOT NULL DEFAULT '',
    -- The group inbound messages of this chat are routed to (NULL: none).
    group_folder TEXT REFERENCES groups(folder) ON DELETE SET NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX chats_group ON chats(group_folder) WHERE group_folder IS NOT NULL;

CREATE TABLE groups (
    folder          TEXT PRIMARY KEY,           -- directory name under groups/, also the group's id
    name            TEXT NOT NULL,
    -- The home chat: where the group was registered and where the host talks by default.
    chat_id         TEXT NOT NULL UNIQUE REFERENCES chats(chat_id) ON DELETE RESTRICT,
    trigger_pattern TEXT NOT NULL DEFAULT '',   -- e.g. '@Andy' ("trigger" is an SQL keyword)
    is_main         INTEGER NOT NULL DEFAULT 0 CHECK (is_main IN (0, 1)),
    created_at      TEXT NOT NULL
);
-- At most one main (admin) group.
CREATE UNIQUE INDEX groups_one_main ON groups(is_main) WHERE is_main = 1;

CREATE TABLE messages (
    id             INTEGER PRIMARY KEY,
    chat_id        TEXT NOT NULL REFERENCES chats(chat_id) ON DELETE CASCADE,
    channel_msg_id TEXT NOT NULL,               -- the channel's own id (Slack ts): the dedupe key
    thread_ts      TEXT NOT NULL DEFAULT '',    -- root message id of the thread ('' = not in a thread)
    user_id        TEXT NOT NULL DEFAULT '',
    text           TEXT NOT NULL,
    ts             TEXT NOT NULL,               -- when the message was sent
    direction      TEXT NOT NULL CHECK (direction IN ('in', 'out')),
    created_at     TEXT NOT NULL,               -- when the host stored it
    UNIQUE (chat_id, channel_msg_id)
);
CREATE INDEX messages_chat_ts ON messages(chat_id, ts);
CREATE INDEX messages_thread ON messages(chat_id, thread_ts, ts) WHERE thread_ts <> '';

CREATE TABLE sessions (
    group_folder TEXT NOT NULL REFERENCES groups(folder) ON DELETE CASCADE,
    thread_key   TEXT NOT NULL DEFAULT '',      -- '' = the group's main session
    session_id   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (group_folder, thread_key)
) WITHOUT ROWID;

-- No foreign key to groups: this is an idempotency log pruned by age, and a
-- request from a group being unregistered must still be de-duplicated.
CREATE TABLE ipc_requests (
    group_folder TEXT NOT NULL,
    request_id   TEXT NOT NULL,
    type         TEXT NOT NULL,
    response     TEXT,                          -- JSON the host answered with (NULL: none)
    processed_at TEXT NOT NULL,
    PRIMARY KEY (group_folder, request_id)
) WITHOUT ROWID;
CREATE INDEX ipc_requests_processed_at ON ipc_requests(processed_at);
