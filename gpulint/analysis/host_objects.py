"""Objects that live on the host whoever holds them: a tokenizer.

A tokenizer (`pipe.tokenizer`, a `tokenizer` parameter, `self.tok`, SDXL's `tokenizer_2`) turns text into
Python ints, lists and CPU tensors: nothing it returns is on the GPU, even when it hangs off a pipeline that
was moved there (`pipe.to("cuda")` moves the UNet and the text encoder, not the tokenizer). So
`n = tokenizer.add_tokens(t); while n == 0:` compares a Python int and waits for nothing.
"""

from __future__ import annotations

import re
from typing import Optional

# The last part of a name that holds a tokenizer (not `tokenizer_out`, which may hold its moved output).
_TOKENIZER = re.compile(r"tokeni[sz]ers?(_?\d+|_one|_two)?$|(^|_)tok$", re.IGNORECASE)


def names_a_tokenizer(dotted: Optional[str]) -> bool:
    """`tokenizer`, `self.text_tokenizer`, `pipe.tokenizer_2`, `tok`: a name that holds a tokenizer."""
    return dotted is not None and _TOKENIZER.search(dotted.rsplit(".", 1)[-1]) is not None
