"""GPU303 on reads that cost nothing a rewrite could save (`analysis/host_reads.py`): a decoding loop that
needs each token on the host to go on, and a profiling loop that reads right after its own synchronize. The
shapes come from real code (seq2seq tutorials, `word_language_model/generate.py`, AMD's profiling harnesses);
the findings next to them stay."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import UNPROVEN_READ, diagnostics, findings

DECODER = """\
import time

import torch
from torch import nn

device = torch.device("cuda")
decoder = nn.GRU(1024, 1024).to(device)
head = nn.Linear(1024, 30000).to(device)
embed = nn.Embedding(30000, 1024).to(device)
optimizer = torch.optim.AdamW([*decoder.parameters(), *head.parameters()])
EOS = 2


"""


def gpu303(body: str, helpers: str = "") -> list[str]:
    return findings(DECODER + helpers + textwrap.dedent(body), select=("GPU303",))


def message(body: str) -> str:
    [d] = diagnostics(DECODER + textwrap.dedent(body), select=("GPU303",))
    return d.message


# ---- the loop needs the value on the host to go on ----------------------------------------------------


def test_greedy_decoding_that_stops_at_eos_is_not_reported():
    # The EOS test decides the loop's exit; the word lookup reads the same token, already on the host.
    assert gpu303("""\
        def greedy(hidden, index2word, max_length=50):
            decoder_input = torch.tensor([[0]], device=device)
            words = []
            with torch.no_grad():
                for _ in range(max_length):
                    output, hidden = decoder(embed(decoder_input), hidden)
                    topv, topi = head(output).topk(1)
                    if topi.item() == EOS:
                        break
                    words.append(index2word[topi.item()])
                    decoder_input = topi.squeeze().detach()
            return words
    """) == []


def test_a_while_loop_on_the_last_token_is_not_reported():
    assert gpu303("""\
        def greedy(hidden, x):
            tok = 0
            with torch.no_grad():
                while tok != EOS:
                    output, hidden = decoder(embed(x), hidden)
                    x = head(output).argmax(-1)
                    tok = x.item()
            return hidden
    """) == []


def test_sampling_that_feeds_the_host_token_back_is_not_reported():
    # pytorch/examples word_language_model/generate.py: the next input is filled from the host sample.
    assert gpu303("""\
        def sample(hidden, words, outf, n):
            input = torch.randint(30000, (1, 1), dtype=torch.long).to(device)
            with torch.no_grad():
                for i in range(n):
                    output, hidden = decoder(embed(input), hidden)
                    word_weights = head(output).squeeze().exp().cpu()
                    word_idx = torch.multinomial(word_weights, 1)[0]
                    input.fill_(word_idx)
                    outf.write(words[word_idx] + " ")
    """) == []


def test_generation_that_builds_the_next_input_from_host_tokens_is_not_reported():
    assert gpu303("""\
        def generate(hidden, n):
            tokens = [0]
            with torch.no_grad():
                for i in range(n):
                    x = torch.tensor([[tokens[-1]]], device=device)
                    output, hidden = decoder(embed(x), hidden)
                    tok = head(output).argmax(-1).item()
                    tokens.append(tok)
            return tokens
    """) == []


def test_other_reads_of_a_loop_that_stops_at_eos_are_not_reported():
    # spro/practical-pytorch: the attention of each step is copied out; the EOS test waits every step anyway.
    assert gpu303("""\
        def evaluate(decoder_input, hidden, index2word, max_length=50):
            attentions = torch.zeros(max_length, max_length)
            words = []
            with torch.no_grad():
                for di in range(max_length):
                    output, hidden = decoder(embed(decoder_input), hidden)
                    attentions[di] += output.squeeze(0).softmax(-1)[:max_length].cpu()
                    topv, topi = head(output).topk(1)
                    ni = topi[0][0]
                    if ni == EOS:
                        break
                    words.append(index2word[ni])
                    decoder_input = topi.squeeze().detach()
            return words, attentions
    """) == []


def test_a_loop_that_stops_on_a_host_counter_still_reports_its_reads():
    assert gpu303("""\
        def translate_some(loader, limit):
            out = []
            with torch.no_grad():
                for i, src in enumerate(loader):
                    if i >= limit:
                        break
                    output, _ = decoder(embed(src.to(device)))
                    out.append(head(output).argmax(-1).cpu())
            return out
    """) == ["21:24 GPU303"]


def test_decoding_that_only_collects_each_word_is_still_reported():
    # The next input stays on the GPU and nothing stops early: the words can be looked up after the loop.
    body = """\
        def greedy(hidden, index2word, max_length=50):
            decoder_input = torch.tensor([[0]], device=device)
            words = []
            with torch.no_grad():
                for _ in range(max_length):
                    output, hidden = decoder(embed(decoder_input), hidden)
                    topv, topi = head(output).topk(1)
                    words.append(index2word[topi.item()])
                    decoder_input = topi.squeeze().detach()
            return words
    """
    assert gpu303(body) == ["21:37 GPU303"]
    assert message(body) == "`topi.item()` waits for the GPU every evaluation step (loop at line 18)"


def test_an_inference_loop_that_collects_every_output_is_still_reported():
    body = """\
        def translate_all(loader):
            out = []
            with torch.no_grad():
                for src in loader:
                    output, _ = decoder(embed(src.to(device)))
                    out.append(head(output).argmax(-1).cpu())
            return out
    """
    [d] = diagnostics(DECODER + textwrap.dedent(body), select=("GPU303",))
    assert (d.location.row, d.location.column) == (19, 24)
    assert d.help == "Collect the tensors on the GPU and copy them to the host once, after the loop (`torch.cat(...).cpu()`)" + UNPROVEN_READ


def test_a_branch_that_does_not_leave_the_loop_is_still_reported():
    assert gpu303("""\
        def best_batch(loader):
            best = 0.0
            with torch.no_grad():
                for src in loader:
                    output, _ = decoder(embed(src.to(device)))
                    score = head(output).max()
                    if score.item() > best:
                        best = score.item()
            return best
    """) == ["20:16 GPU303"]  # (the read in its body joins the test's finding: read_runs)


def test_an_early_stop_inside_a_training_step_is_still_reported():
    # A training step that leaves on a loss threshold: checking every N steps would do.
    assert gpu303("""\
        def train(loader):
            for src, tgt in loader:
                output, _ = decoder(embed(src.to(device)))
                loss = nn.functional.cross_entropy(head(output).flatten(0, 1), tgt.to(device).flatten())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if loss.item() < 0.01:
                    break
    """) == ["21:12 GPU303"]


# ---- the iteration already waited for the device ----------------------------------------------------


MONITOR = """\
class Monitor:
    def start_timing(self):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.start = time.time()

    def end_timing(self):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.time() - self.start


class Clock:
    def start_timing(self):
        self.start = time.time()

    def end_timing(self):
        return time.time() - self.start


monitor = Monitor()
clock = Clock()


"""


def test_a_read_right_after_the_harness_synchronize_is_not_reported():
    assert gpu303("""\
        def profile(loader):
            losses, times = [], []
            for src, tgt in loader:
                start = time.time()
                output, _ = decoder(embed(src.to(device)))
                loss = nn.functional.cross_entropy(head(output).flatten(0, 1), tgt.to(device).flatten())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                times.append(time.time() - start)
                losses.append(loss.item())
            return losses, times
    """) == []


def test_a_read_right_after_a_timing_helper_that_synchronizes_is_not_reported():
    assert gpu303(helpers=MONITOR, body="""\
        def profile(loader):
            losses, timings = [], {}
            for src, tgt in loader:
                monitor.start_timing()
                output, _ = decoder(embed(src.to(device)))
                loss = nn.functional.cross_entropy(head(output).flatten(0, 1), tgt.to(device).flatten())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                timings["step"] = monitor.end_timing()
                timings["total"] = sum(timings.values())
                losses.append(loss.item())
            return losses
    """) == []


def test_a_read_after_a_timing_helper_that_does_not_synchronize_is_still_reported():
    assert gpu303(helpers=MONITOR, body="""\
        def profile(loader):
            losses, timings = [], {}
            for src, tgt in loader:
                clock.start_timing()
                output, _ = decoder(embed(src.to(device)))
                loss = nn.functional.cross_entropy(head(output).flatten(0, 1), tgt.to(device).flatten())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                timings["step"] = clock.end_timing()
                losses.append(loss.item())
            return losses
    """) == ["48:23 GPU303"]


def test_gpu_work_between_the_synchronize_and_the_read_is_still_reported():
    # The read waits for the backward pass queued after the synchronize.
    body = """\
        def flops(loader):
            results = []
            for src, tgt in loader:
                start = time.time()
                output, _ = decoder(embed(src.to(device)))
                loss = nn.functional.cross_entropy(head(output).flatten(0, 1), tgt.to(device).flatten())
                torch.cuda.synchronize()
                step_time = time.time() - start
                loss.backward()
                optimizer.step()
                results.append({"loss": loss.item(), "time": step_time})
            return results
    """
    assert gpu303(body) == ["24:33 GPU303"]
    assert message(body) == "`loss.item()` waits for the GPU every training step (loop at line 16)"


# A synchronize drains the queue only on the steps it runs: every N steps leaves the other reads waiting.
@pytest.mark.parametrize(
    "before_read, expected",
    [
        ("if step % 10 == 0:\n    torch.cuda.synchronize()", ["24:23 GPU303"]),
        ("pass", ["23:23 GPU303"]),
        ("torch.cuda.current_stream().synchronize()", []),
    ],
    ids=["synchronize-every-n-steps", "no-synchronize", "current-stream-synchronize"],
)
def test_a_read_after_a_synchronize_is_reported_unless_it_runs_every_step(before_read, expected):
    assert gpu303(
        """\
        def train(loader):
            losses = []
            for step, (src, tgt) in enumerate(loader):
                output, _ = decoder(embed(src.to(device)))
                loss = nn.functional.cross_entropy(head(output).flatten(0, 1), tgt.to(device).flatten())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
{}
                losses.append(loss.item())
            return losses
    """.format(textwrap.indent(before_read, " " * 16))
    ) == expected


def test_generation_that_appends_the_host_token_it_feeds_back_is_not_reported():
    # d2l's predict_rnn: the read goes straight into the list the next input is built from.
    assert gpu303("""\
        def predict(prefix, num_chars, state):
            output = [prefix[0]]
            with torch.no_grad():
                for t in range(num_chars):
                    X = torch.tensor([output[-1]], device=device).view(1, 1)
                    Y, state = decoder(embed(X), state)
                    output.append(int(head(Y).argmax(dim=1).item()))
            return output
    """) == []


# ---- the read is the loop's output, written out batch by batch ------------------------------------------


def test_features_saved_to_a_file_each_batch_are_not_reported():
    assert gpu303("""\
        import numpy as np

        def extract(loader, out_dir):
            with torch.no_grad():
                for i, x in enumerate(loader):
                    feats = head(embed(x.to(device))).cpu().numpy()
                    np.save(f"{out_dir}/{i}.npy", feats)
    """) == []


def test_predictions_written_line_by_line_are_not_reported():
    assert gpu303("""\
        def predict(loader, path):
            with open(path, "w") as f, torch.no_grad():
                for x in loader:
                    label = head(embed(x.to(device))).argmax(-1).item()
                    f.write(f"{label}\\n")
    """) == []


def test_a_frame_shown_each_batch_is_not_reported():
    assert gpu303("""\
        import matplotlib.pyplot as plt

        def show(loader):
            with torch.no_grad():
                for x in loader:
                    x = x.to(device)
                    mask = head(embed(x)).ge(0.5).cpu().numpy()
                    image = x.cpu().numpy()[0].transpose((1, 2, 0))
                    gray = mask.squeeze() * 255
                    plt.subplot(121).imshow(image)
                    plt.subplot(122).imshow(gray, cmap="gray")
                    plt.show()
    """) == []


def test_codes_flushed_to_a_dataset_every_n_batches_are_not_reported():
    # parler-tts' encoding pass: the list is shipped and emptied every N batches, so memory stays bounded.
    assert gpu303("""\
        def encode(loader, save_every, ship):
            codes = []
            with torch.no_grad():
                for step, x in enumerate(loader):
                    lab = head(embed(x.to(device))).cpu().to(torch.int16)
                    codes.extend(lab)
                    if (step + 1) % save_every == 0:
                        ship(codes)
                        codes = []
    """) == []


def test_outputs_collected_in_memory_and_written_after_the_loop_are_still_reported():
    body = """\
        import numpy as np

        def extract(loader, path):
            feats = []
            with torch.no_grad():
                for x in loader:
                    feats.append(head(embed(x.to(device))).cpu().numpy())
            np.save(path, np.concatenate(feats))
    """
    [d] = diagnostics(DECODER + textwrap.dedent(body), select=("GPU303",))
    assert (d.location.row, d.code) == (20, "GPU303")
    assert d.help == "Collect the tensors on the GPU and copy them to the host once, after the loop (`torch.cat(...).cpu()`)" + UNPROVEN_READ


def test_a_write_that_does_not_take_the_read_keeps_the_finding():
    # Only the log line is written; the loss read is per-batch bookkeeping.
    assert gpu303("""\
        def evaluate(loader, log):
            total = 0.0
            with torch.no_grad():
                for x in loader:
                    loss = head(embed(x.to(device))).mean()
                    total += loss.item()
                    log.write("batch done\\n")
            return total
    """) == ["19:22 GPU303"]


def test_a_read_written_out_inside_a_training_step_is_still_reported():
    assert gpu303("""\
        def train(loader, f):
            for x in loader:
                loss = head(embed(x.to(device))).mean()
                loss.backward()
                optimizer.step()
                f.write(f"{loss.item()}\\n")
    """) == ["19:20 GPU303"]


# ---- a loop over a few hand-written items is not a step loop --------------------------------------------


def test_scores_of_a_few_hand_written_prompts_are_not_reported():
    # DeepSpeed-Chat's rw_eval: two prompts, each scored once.
    assert gpu303("""\
        def score(tokenize):
            prompts = ["Human: hi", "Human: tell me about the moon"]
            answers = ["Hello.", "It is far."]
            for prompt, answer in zip(prompts, answers):
                with torch.no_grad():
                    out = head(embed(tokenize(prompt, answer).to(device)))
                print("score:", out.mean().item())
    """) == []


def test_a_literal_loop_inside_a_batch_loop_reports_for_the_batch_loop():
    body = """\
        def evaluate(loader):
            with torch.no_grad():
                for x in loader:
                    for mode in ["mean", "max"]:
                        out = head(embed(x.to(device)))
                        print(mode, out.mean().item())
    """
    assert gpu303(body) == ["19:29 GPU303"]
    assert message(body) == "`out.mean().item()` waits for the GPU every evaluation step (loop at line 16)"


def test_a_list_that_grows_is_not_a_few_literals():
    assert gpu303("""\
        def score(tokenize, more):
            prompts = ["Human: hi"]
            prompts.extend(more)
            for prompt in prompts:
                with torch.no_grad():
                    out = head(embed(tokenize(prompt).to(device)))
                print("score:", out.mean().item())
    """) == ["20:25 GPU303"]


# ---- the host needs the value to allocate or shape the next tensor ---------------------------------------


def test_a_received_shape_that_sizes_the_next_buffer_is_not_reported():
    # Megatron's pipeline p2p: the stage learns the next activation's shape, then allocates the receive buffer.
    assert gpu303("""\
        def train(loader, recv_shape):
            for x in loader:
                shape = recv_shape(x.to(device)).tolist()
                buf = torch.empty(shape, device=device, requires_grad=True)
                loss = head(embed(x.to(device)) + buf).mean()
                loss.backward()
                optimizer.step()
    """) == []


def test_a_count_that_shapes_a_view_is_not_reported():
    assert gpu303("""\
        def evaluate(loader):
            outs = []
            with torch.no_grad():
                for x, lengths in loader:
                    out = head(embed(x.to(device)))
                    parts = torch.split(out, lengths.to(device).tolist())
                    outs.append(parts[0].sum(0))
            return outs
    """) == []


def test_a_read_beside_a_reshape_of_other_sizes_is_still_reported():
    assert gpu303("""\
        def train(loader):
            for x in loader:
                out = head(embed(x.to(device)))
                loss = out.view(-1, 30000).mean()
                loss.backward()
                optimizer.step()
                print(loss.item())
    """) == ["20:15 GPU303"]


def test_outputs_dropped_every_n_batches_are_still_reported():
    # The list is emptied without being handed on: nothing is written out, the copies can still be deferred.
    assert gpu303("""\
        def encode(loader):
            codes = []
            with torch.no_grad():
                for step, x in enumerate(loader):
                    codes.append(head(embed(x.to(device))).cpu())
                    if step % 10 == 0:
                        codes = []
    """) == ["18:26 GPU303"]


def test_a_loss_written_to_a_log_each_batch_is_still_reported():
    # A per-batch loss in a log file is bookkeeping, like printing it, not the loop's product.
    assert gpu303("""\
        def evaluate(loader, log):
            with torch.no_grad():
                for x in loader:
                    val_loss = head(embed(x.to(device))).mean()
                    log.write(f"{val_loss.item()}\\n")
    """) == ["18:26 GPU303"]


def test_a_value_printed_through_a_progress_bar_or_a_log_file_is_still_reported():
    # `pbar.write(...)` / `log_file.write(...)` print or log: the value can be kept on the GPU and written every N steps.
    for receiver in ("pbar", "self.log_file", "sys.stdout"):
        [found] = gpu303(f"""\
            import sys

            def evaluate(loader, pbar):
                with torch.no_grad():
                    for x in loader:
                        acc = head(embed(x.to(device))).argmax(-1).float().mean()
                        {receiver}.write(f"acc {{acc.item()}}")
        """)
        assert found == f"20:{len(receiver) + 27} GPU303", receiver
