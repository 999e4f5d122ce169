-- 0001: chat state — the chats the host has seen, the groups registered on
-- them, their messages, agent sessions and the IPC idempotency log.
-- (The same schema as SQLite's 0001; times are timestamptz.)

CREATE TABLE chats (
    chat_id      text PRIMARY KEY,              -- globally unique (channels prefix their ids if needed)
    channel      text NOT NULL,                 -- 'slack', 'console', …
    name         text NOT NULL DEFAULT '',
    -- The group inbound messages of this chat are routed to (NULL: none);
    -- its foreign key is added below, once groups exists.
    group_folder text,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX chats_group ON chats(group_folder) WHERE group_folder IS NOT NULL;

CREATE TABLE groups (
    folder          text PRIMARY KEY,           -- directory name under groups/, also the group's id
    name            text NOT NULL,
    -- The home chat: where the group was registered and where the host talks by default.
    chat_id         text NOT NULL UNIQUE REFERENCES chats(chat_id) ON DELETE RESTRICT,
    trigger_pattern text NOT NULL DEFAULT '',   -- e.g. '@Andy' ("trigger" is an SQL keyword)
    is_main         boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL
);
-- At most one main (admin) group.
CREATE UNIQUE INDEX groups_one_main ON groups(is_main) WHERE is_main;

ALTER TABLE chats ADD CONSTRAINT chats_group_folder_fkey
    FOREIGN KEY (group_folder) REFERENCES groups(folder) ON DELETE SET NULL;

CREATE TABLE messages (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chat_id        text NOT NULL REFERENCES chats(chat_id) ON DELETE CASCADE,
    channel_msg_id text NOT NULL,               -- the channel's own id (Slack ts): the dedupe key
    thread_ts      text NOT NULL DEFAULT '',    -- root message id of the thread ('' = not in a thread)
    user_id        text NOT NULL DEFAULT '',
    text           text NOT NULL,
    ts             timestamptz NOT NULL,        -- when the message was sent
    direction      text NOT NULL CHECK (direction IN ('in', 'out')),
    created_at     timestamptz NOT NULL,        -- when the host stored it
    UNIQUE (chat_id, channel_msg_id)
);
CREATE INDEX messages_chat_ts ON messages(chat_id, ts);
CREATE INDEX messages_thread ON messages(chat_id, thread_ts, ts) WHERE thread_ts <> '';

CREATE TABLE sessions (
    group_folder text NOT NULL REFERENCES groups(folder) ON DELETE CASCADE,
    thread_key   text NOT NULL DEFAULT '',      -- '' = the group's main session
    session_id   text NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (group_folder, thread_key)
);

-- No foreign key to groups: this is an idempotency log pruned by age, and a
-- request from a group being unregistered must still be de-duplicated.
CREATE TABLE ipc_requests (
    group_folder text NOT NULL,
    request_id   text NOT NULL,
    type         text NOT NULL,
    response     text,                          -- JSON the host answered with (NULL: none)
    processed_at timestamptz NOT NULL,
    PRIMARY KEY (group_folder, request_id)
);
CREATE INDEX ipc_requests_processed_at ON ipc_requests(processed_at);
