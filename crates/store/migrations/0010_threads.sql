-- Agent thread memory: the messages of each thread, in order. A thread belongs to one
-- (principal, agent) pair: the same thread id of another principal or agent is another thread.
-- `vector` is the message's embedding (base64 of little-endian f32s) when the server had an
-- embedding model as it stored the message.

CREATE TABLE thread_messages (
    principal     TEXT NOT NULL,
    agent         TEXT NOT NULL,
    thread_id     TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    role          TEXT NOT NULL,
    content       TEXT NOT NULL,
    vector        TEXT,
    execution_id  TEXT,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (principal, agent, thread_id, seq)
);

CREATE INDEX thread_messages_owner ON thread_messages (principal, agent, created_at);
