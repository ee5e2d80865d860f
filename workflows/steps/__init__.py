"""Step types, one folder each: `workflows/steps/<name>/` holds everything one type is.

`config.py` (domain: its config, parsed and checked), `executor.py` (application: carrying it out),
`form.py` (the builder's form and what its result offers to conditions), `sentences.py` (its lines in a
workflow's summary and its decisions in a run's timeline). `registry.py` lists the types, one line each;
the engine, validation, builder, timeline and stats ask the registry, never a type by name.
The recipe: docs/howto/add-a-step-type.md.
"""
