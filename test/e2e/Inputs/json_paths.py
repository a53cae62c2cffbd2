"""PATH=VALUE edits of a JSON object, for the scripts that edit schedule
files and checkpoints as a hand edit or a fuzzer would."""
import json


def apply_edit(obj, edit):
    """Sets the JSON `VALUE` at the dotted `PATH` of `obj` (list indices are
    numbers: `train.optimizer.lr=-1`, `tensors.0.dtype="bf16"`)."""
    key, value = edit.split("=", 1)
    parts = key.split(".")
    target = obj
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    last = parts[-1]
    target[int(last) if isinstance(target, list) else last] = json.loads(value)
