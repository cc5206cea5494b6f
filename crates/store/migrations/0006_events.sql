-- Live execution events, stored for every execution that pauses, streams or is subscribed to:
-- numbered per execution, replayable from any id.

CREATE TABLE execution_events (
    execution_id  TEXT NOT NULL,
    id            BIGINT NOT NULL,
    ts            BIGINT NOT NULL,
    type          TEXT NOT NULL,
    data          TEXT NOT NULL,
    PRIMARY KEY (execution_id, id)
);
CREATE INDEX execution_events_ts ON execution_events (ts);
