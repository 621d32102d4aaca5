"""GPU405 eval-without-no-grad: a model run in a loop after `.eval()` with autograd on."""

from __future__ import annotations

from gpulint.diagnostics import Severity
from tests.conftest import diagnostics, findings

GPU405 = {"select": ("GPU405",)}


def test_evaluation_function_without_no_grad():
    source = """\
        import torch


        def evaluate(model, loader):
            model.eval()
            correct = 0
            for images, labels in loader:
                logits = model(images.cuda())
                correct += (logits.argmax(1) == labels.cuda()).sum()
            return correct
        """
    assert findings(source, **GPU405) == ["8:18 GPU405"]
    (diagnostic,) = diagnostics(source, **GPU405)
    assert diagnostic.severity == Severity.INFO
    assert "torch.no_grad()" in diagnostic.help and diagnostic.fix is None


def test_validation_loop_inside_the_epoch_loop():
    source = """\
        import torch

        for epoch in range(10):
            model.train()
            for x, y in train_loader:
                loss = criterion(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            model.eval()
            for x, y in val_loader:
                val_loss = criterion(model(x.cuda()), y.cuda())
        """
    assert findings(source, **GPU405) == ["11:30 GPU405"]


def test_no_grad_context_decorator_and_inference_mode_are_silent():
    source = """\
        import torch


        @torch.no_grad()
        def evaluate(model, loader):
            model.eval()
            for x in loader:
                model(x.cuda())


        def test(model, loader):
            model.eval()
            with torch.inference_mode():
                for x in loader:
                    model(x.cuda())
            for x in loader:
                with torch.no_grad():
                    model(x.cuda())
        """
    assert findings(source, **GPU405) == []


def test_set_grad_enabled_is_silent():
    source = """\
        import torch


        def run(model, loader, training):
            model.eval()
            for x in loader:
                with torch.set_grad_enabled(training):
                    model(x.cuda())


        def predict(model, loader):
            torch.set_grad_enabled(False)
            model.eval()
            for x in loader:
                model(x.cuda())
        """
    assert findings(source, **GPU405) == []


def test_set_grad_enabled_after_the_loop_or_true_does_not_silence():
    source = """\
        import torch


        def predict(model, loader):
            model.eval()
            for x in loader:
                model(x.cuda())
            torch.set_grad_enabled(False)


        def predict_again(model, loader):
            torch.set_grad_enabled(True)
            model.eval()
            for x in loader:
                model(x.cuda())
        """
    assert findings(source, **GPU405) == ["7:9 GPU405", "15:9 GPU405"]


def test_function_called_under_no_grad_is_silent():
    source = """\
        import torch


        def evaluate(model, loader):
            model.eval()
            for x in loader:
                model(x.cuda())


        with torch.no_grad():
            evaluate(net, val_loader)
        """
    assert findings(source, **GPU405) == []


def test_loops_that_need_gradients_are_silent():
    source = """\
        import torch


        def saliency(model, loader):
            model.eval()
            for x in loader:
                x = x.cuda().requires_grad_()
                model(x).max().backward()


        def adversarial(model, loader):
            model.eval()
            for x in loader:
                x = x.cuda()
                grad, = torch.autograd.grad(model(x).sum(), x)


        def finetune_frozen_bn(model, loader, optimizer):
            model.eval()
            for x in loader:
                model(x.cuda()).sum().backward()
                optimizer.step()
        """
    assert findings(source, **GPU405) == []


def test_loop_after_train_is_silent():
    source = """\
        import torch

        model.eval()
        report(model)
        model.train()
        for x in loader:
            model(x.cuda())
        """
    assert findings(source, **GPU405) == []


def test_loop_before_eval_and_other_objects_are_silent():
    source = """\
        import torch

        for x in loader:
            model(x.cuda())
        model.eval()
        for x in loader:
            other(x.cuda())
        """
    assert findings(source, **GPU405) == []


def test_project_decorator_that_picks_inference_mode_is_trusted():
    # YOLOv5 val.py: `@smart_inference_mode()` returns torch.inference_mode() or torch.no_grad().
    source = """\
        import torch
        from utils.torch_utils import smart_inference_mode


        @smart_inference_mode()
        def run(model, dataloader):
            model.eval()
            for im, targets in dataloader:
                preds = model(im.to("cuda"))
        """
    assert findings(source, **GPU405) == []
