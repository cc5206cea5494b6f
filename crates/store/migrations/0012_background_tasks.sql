-- The tasks of an approved agent plan: each runs as a background sub-agent (an execution of its
-- own) once the tasks it depends on succeeded. `spec` is the sub-agent's run spec (JSON),
-- `deps` the ids it waits for (JSON), `corrections` what the orchestrator queued for it (JSON).

CREATE TABLE background_tasks (
    run_id        TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    title         TEXT NOT NULL,
    principal     TEXT NOT NULL,
    spec          TEXT NOT NULL,
    deps          TEXT NOT NULL,
    status        TEXT NOT NULL,
    execution_id  TEXT,
    result        TEXT,
    corrections   TEXT NOT NULL DEFAULT '[]',
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (run_id, task_id)
);
