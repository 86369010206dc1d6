"""Task sets: what a sweep file's `[[tasks]]` table names, and the tasks it resolves into.

- `config.py`: the table as validated (`TaskSetConfig`), light, so that a sweep file is checked
  without importing what runs the tasks;
- `resolve.py`: the table resolved into tasks (a dataset, a directory of your own, Harbor folders),
  with the kinds and images they bring registered (`resolve`, `prepare`, `TaskSet`).
"""
