"""Making runs and reporting on them: the runner, inputs, dry runs, the gate, suites, labels, flips."""
