"""Writes the tensors a tuned model changed, in f16, as the layers file search-model.sh applies.

    python export.py BASE_MODEL_DIR TUNED_MODEL_DIR ../layers.f16.safetensors

Only the encoder's tensors are written (the pooler is not used: sentence vectors are the mean of
the token states); a tensor the tuning left as it was is left out.
"""
import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

base, tuned, out = sys.argv[1:4]
stock = load_file(os.path.join(base, "model.safetensors"))
new = load_file(os.path.join(tuned, "model.safetensors"))
layers = {
    name: value.astype(np.float16)
    for name, value in sorted(new.items())
    if name.startswith("encoder.") and not np.array_equal(value, stock[name])
}
save_file(layers, out)
print(f"{len(layers)} tensors, {sum(v.size for v in layers.values())} values -> {out}")
