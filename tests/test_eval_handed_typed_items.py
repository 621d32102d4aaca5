"""GPU405 across modules, a handful of items typed on the command line: a decoding demo (`pretrained.py`) reads the
wav files named on its command line (`nargs="+"`), switches the model to eval mode and hands it to another module's
search helper (`greedy_search(model, ...)`, which loops over the frames) once per file, training nothing. A few files,
once: silent (`FunctionSummary.typed`). The same helper called per batch of a data loader stays reported."""

from __future__ import annotations

from tests.projects_helper import lint_written

SEARCH = """\
    import torch


    def greedy_search(model, encoder_out):
        hyp = []
        for t in range(encoder_out.size(1)):
            logits = model.joiner(encoder_out[:, t])
            hyp.append(logits.argmax().item())
        return hyp
"""
MODEL = """\
    import torch


    class Transducer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.LSTM(80, 512, 4)
            self.joiner = torch.nn.Linear(512, 500)
"""
DEMO = """\
    import argparse

    import torch
    from model import Transducer
    from search import greedy_search


    def get_parser():
        parser = argparse.ArgumentParser()
        parser.add_argument("--checkpoint", type=str, required=True)
        parser.add_argument("sound_files", type=str, nargs="+")
        return parser


    def main():
        args = get_parser().parse_args()
        model = Transducer().to("cuda")
        model.load_state_dict(torch.load(args.checkpoint))
        model.eval()
        waves = [torch.load(f).cuda() for f in args.sound_files]
        with torch.no_grad():
            encoder_out, _ = model.encoder(torch.stack(waves))
        hyps = []
        {loop}
            hyps.append(greedy_search(model=model, encoder_out=encoder_out[i : i + 1]))
        print(hyps)


    if __name__ == "__main__":
        main()
"""
DECODE = """\
    import argparse

    import torch
    from model import Transducer
    from search import greedy_search


    def main(loader):
        parser = argparse.ArgumentParser()
        parser.add_argument("--checkpoints", type=str, nargs="+")
        args = parser.parse_args()
        model = Transducer().to("cuda")
        model.load_state_dict(torch.load(args.checkpoints[0]))
        model.eval()
        hyps = []
        for batch in loader:
            encoder_out, _ = model.encoder(batch.cuda())
            hyps.append(greedy_search(model, encoder_out))
        print(hyps)
"""


def _findings(tmp_path, monkeypatch, caller: str) -> list[str]:
    files = {"search.py": SEARCH, "model.py": MODEL, "demo.py": caller}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU405" in f]


def test_a_demo_decoding_the_files_typed_on_the_command_line_is_a_handful(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch, DEMO.format(loop="for i in range(encoder_out.size(0)):")) == []
    over_the_files = DEMO.format(loop="for i, name in enumerate(args.sound_files):")
    assert _findings(tmp_path / "files", monkeypatch, over_the_files) == []


def test_a_decode_script_over_a_loader_stays_reported(tmp_path, monkeypatch):
    # the same helper per batch of a data loader: a dataset, not a few typed files (an option of `nargs="+"` read
    # for something else does not make it a handful)
    assert _findings(tmp_path, monkeypatch, DECODE) == ["search.py:7 GPU405"]


def test_a_demo_without_a_typed_list_is_reported(tmp_path, monkeypatch):
    # no option of `nargs="+"`: nothing says how many items the loop runs over
    untyped = DEMO.format(loop="for i in range(encoder_out.size(0)):").replace('"sound_files", type=str, nargs="+"', '"--sound-dir", type=str')
    untyped = untyped.replace("args.sound_files", "sorted(__import__('glob').glob(args.sound_dir + '/*.pt'))")
    assert _findings(tmp_path, monkeypatch, untyped) == ["search.py:7 GPU405"]
