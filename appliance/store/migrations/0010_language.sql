-- What a submission is written in (PyTorch, Triton, CUDA inline, CUDA,
-- HIP, CuTe DSL), read from its text when it arrives, for the
-- leaderboards' language column. Empty for submissions stored before.
ALTER TABLE submissions ADD COLUMN language TEXT NOT NULL DEFAULT '';
