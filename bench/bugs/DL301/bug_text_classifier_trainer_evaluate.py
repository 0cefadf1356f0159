# source: https://github.com/flairNLP/flair/pull/133
# category: DL301
# expect: flag 144, 145, 152
# evidence: TextClassifierTrainer.evaluate() runs self.model.forward on every dev batch with autograd on; the returned eval_loss carries a grad_fn whose graph spans all evaluated batches.
import random
from typing import List

import torch
import torch.nn as nn

torch.manual_seed(0)
random.seed(0)
MICRO_AVG_METRIC = 'MICRO_AVG'


class Sentence:
    def __init__(self, tokens, label):
        self.tokens = tokens
        self.label = label
        self.embedding = None

    def get_label_names(self):
        return [self.label]


class Dictionary:
    def __init__(self, items):
        self.items = list(items)

    def get_idx_for_item(self, item):
        return self.items.index(item)


class Metric:
    def __init__(self, name):
        self.name = name
        self.tp = self.fp = 0

    def f_score(self):
        return self.tp / max(1, self.tp + self.fp)

    def accuracy(self):
        return self.f_score()


def convert_labels_to_one_hot(label_list, label_dict):
    return [[1 if l in labels else 0 for l in label_dict.items] for labels in label_list]


def calculate_micro_avg_metric(y_true, y_pred, labels):
    metric = Metric(MICRO_AVG_METRIC)
    for t, p in zip(y_true, y_pred):
        metric.tp += int(t == p)
        metric.fp += int(t != p)
    return metric


def clear_embeddings(sentences: List[Sentence]):
    for s in sentences:
        s.embedding = None


class TextClassifier(nn.Module):
    def __init__(self, vocab, label_dictionary):
        super().__init__()
        self.label_dictionary = label_dictionary
        self.embeddings = nn.Embedding(vocab, 16)
        self.decoder = nn.Linear(16, len(label_dictionary.items))
        self.loss_function = nn.CrossEntropyLoss()

    def forward(self, sentences: List[Sentence]):
        text = torch.stack([self.embeddings(torch.tensor(s.tokens)).mean(0) for s in sentences])
        return self.decoder(text)

    def obtain_labels(self, scores):
        return [[self.label_dictionary.items[int(i)]] for i in scores.argmax(1)]

    def calculate_loss(self, scores, sentences):
        target = torch.tensor([self.label_dictionary.get_idx_for_item(s.label) for s in sentences])
        return self.loss_function(scores, target)


class TextClassifierTrainer:
    """
    Training class to train and evaluate a text classification model.
    """

    def __init__(self, model: TextClassifier, corpus, label_dict: Dictionary, test_mode: bool = False) -> None:
        self.model: TextClassifier = model
        self.corpus = corpus
        self.label_dict: Dictionary = label_dict
        self.test_mode: bool = test_mode

    def train(self, learning_rate: float = 0.1, mini_batch_size: int = 4, max_epochs: int = 2,
              embeddings_in_memory: bool = True):
        optimizer = torch.optim.SGD(self.model.parameters(), lr=learning_rate)
        train_data = self.corpus['train']
        results = []
        for epoch in range(max_epochs):
            if not self.test_mode:
                random.shuffle(train_data)
            self.model.train()
            batches = [train_data[x:x + mini_batch_size] for x in range(0, len(train_data), mini_batch_size)]
            current_loss: float = 0
            for batch_no, batch in enumerate(batches):
                scores = self.model.forward(batch)
                loss = self.model.calculate_loss(scores, batch)
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
                optimizer.step()
                current_loss += loss.item()
                if not embeddings_in_memory:
                    clear_embeddings(batch)

            self.model.eval()
            results.append(self._calculate_evaluation_results_for(
                'DEV', self.corpus['dev'], embeddings_in_memory, epoch, mini_batch_size))
            self.model.train()
        return results

    def _calculate_evaluation_results_for(self, dataset_name, dataset, embeddings_in_memory, epoch, mini_batch_size):
        metrics, loss = self.evaluate(dataset, mini_batch_size=mini_batch_size,
                                      embeddings_in_memory=embeddings_in_memory)
        f_score = metrics[MICRO_AVG_METRIC].f_score()
        acc = metrics[MICRO_AVG_METRIC].accuracy()
        print("{0:<7} epoch {1} - loss {2:.8f} - f-score {3:.4f} - acc {4:.4f}".format(
            dataset_name, epoch + 1, loss, f_score, acc))
        return acc, f_score, loss

    def evaluate(self, sentences: List[Sentence], eval_class_metrics: bool = False, mini_batch_size: int = 16,
                 embeddings_in_memory: bool = True) -> (dict, float):
        """
        Evaluates the model with the given list of sentences.
        """
        eval_loss = 0

        batches = [sentences[x:x + mini_batch_size] for x in
                   range(0, len(sentences), mini_batch_size)]

        y_pred = []
        y_true = convert_labels_to_one_hot([sentence.get_label_names() for sentence in sentences], self.label_dict)

        for batch in batches:
            scores = self.model.forward(batch)
            labels = self.model.obtain_labels(scores)
            loss = self.model.calculate_loss(scores, batch)

            if not embeddings_in_memory:
                clear_embeddings(batch)

            eval_loss += loss

            y_pred.extend(convert_labels_to_one_hot([[label for label in sent_labels] for sent_labels in labels], self.label_dict))

        metrics = [calculate_micro_avg_metric(y_true, y_pred, self.label_dict)]

        eval_loss /= len(sentences)

        metrics_dict = {metric.name: metric for metric in metrics}

        return metrics_dict, eval_loss


def make_corpus(n, label_dict):
    return [Sentence([random.randrange(50) for _ in range(5)], random.choice(label_dict.items)) for _ in range(n)]


if __name__ == "__main__":
    label_dict = Dictionary(['POSITIVE', 'NEGATIVE'])
    corpus = {'train': make_corpus(16, label_dict), 'dev': make_corpus(12, label_dict)}
    model = TextClassifier(50, label_dict)
    trainer = TextClassifierTrainer(model, corpus, label_dict)
    results = trainer.train(mini_batch_size=4)
    dev_loss = results[-1][2]
    assert torch.is_tensor(dev_loss) and dev_loss.grad_fn is not None
    seen, stack, n_linear = set(), [dev_loss.grad_fn], 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        n_linear += type(node).__name__ == "AddmmBackward0"
        stack.extend(n for n, _ in node.next_functions)
    assert n_linear == 3, n_linear  # 12 dev sentences / batches of 4: every dev forward is still in the graph
    print("evidence holds: dev eval_loss carries a graph over", n_linear, "evaluated batches")
