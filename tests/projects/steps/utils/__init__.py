from .meters import AverageMeter, ItemMeter, accuracy, log_scalars, loss_text, percent_text, report, lr_text
