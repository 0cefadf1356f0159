# source: https://github.com/pai4451/ML2021/issues/2
# category: DL401
# expect: flag 95
# evidence: train_loss += output.loss keeps one AddBackward node per training step, so until the logging reset every step's BERT graph stays reachable from train_loss.grad_fn.
import random
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from dataclasses import dataclass
from torch.utils.data import DataLoader, TensorDataset


def same_seeds(seed):
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
    np.random.seed(seed)
    random.seed(seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


@dataclass
class QuestionAnsweringModelOutput:
    loss: torch.Tensor = None
    start_logits: torch.Tensor = None
    end_logits: torch.Tensor = None


class BertForQuestionAnswering(nn.Module):
    """tiny stand-in for transformers.BertForQuestionAnswering"""
    def __init__(self, vocab_size=50, hidden_size=16):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.token_type_embeddings = nn.Embedding(2, hidden_size)
        self.encoder = nn.Linear(hidden_size, hidden_size)
        self.qa_outputs = nn.Linear(hidden_size, 2)

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def forward(self, input_ids, token_type_ids, attention_mask, start_positions=None, end_positions=None):
        h = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        h = torch.tanh(self.encoder(h)) * attention_mask.unsqueeze(-1)
        start_logits, end_logits = self.qa_outputs(h).split(1, dim=-1)
        start_logits, end_logits = start_logits.squeeze(-1), end_logits.squeeze(-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = (F.cross_entropy(start_logits, start_positions) + F.cross_entropy(end_logits, end_positions)) / 2
        return QuestionAnsweringModelOutput(loss=loss, start_logits=start_logits, end_logits=end_logits)


def count_accumulated_steps(t):
    n, fn = 0, t.grad_fn
    while fn is not None and type(fn).__name__ == "AddBackward0":
        n += 1
        fn = fn.next_functions[0][0]
    return n


if __name__ == "__main__":
    same_seeds(0)
    device = "cpu"
    model = BertForQuestionAnswering.from_pretrained("bert-base-chinese").to(device)
    fp16_training = False

    # random tokenized paragraphs/questions instead of QA_Dataset
    n, seq = 32, 20
    train_set = TensorDataset(torch.randint(0, 50, (n, seq)), torch.randint(0, 2, (n, seq)), torch.ones(n, seq),
                              torch.randint(0, seq, (n,)), torch.randint(0, seq, (n,)))
    train_batch_size = 4
    train_loader = DataLoader(train_set, batch_size=train_batch_size, shuffle=True, pin_memory=False)

    num_epoch = 1
    validation = False
    logging_step = 100
    learning_rate = 1e-4
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    model.train()
    print("Start Training ...")
    for epoch in range(num_epoch):
        step = 1
        train_loss = train_acc = 0
        for data in train_loader:
            data = [i.to(device) for i in data]
            output = model(input_ids=data[0], token_type_ids=data[1], attention_mask=data[2],
                           start_positions=data[3], end_positions=data[4])
            start_index = torch.argmax(output.start_logits, dim=1)
            end_index = torch.argmax(output.end_logits, dim=1)
            train_acc += ((start_index == data[3]) & (end_index == data[4])).float().mean()
            train_loss += output.loss
            if fp16_training:
                accelerator.backward(output.loss)
            else:
                output.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step % logging_step == 0:
                print(f"Epoch {epoch + 1} | Step {step} | loss = {train_loss.item() / logging_step:.3f}, acc = {train_acc / logging_step:.3f}")
                train_loss = train_acc = 0

    n_steps = step - 1
    assert n_steps == 8
    assert train_loss.requires_grad and not train_acc.requires_grad
    assert count_accumulated_steps(train_loss) >= n_steps - 1, count_accumulated_steps(train_loss)
    print("evidence holds: train_loss.grad_fn chains %d additions, one graph per step kept alive" % count_accumulated_steps(train_loss))
