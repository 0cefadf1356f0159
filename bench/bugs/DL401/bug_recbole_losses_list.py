# source: https://github.com/RUCAIBox/RecBole/pull/307
# category: DL401
# expect: flag 116
# evidence: inside one Trainer._train_epoch every earlier batch loss (with its grad_fn and BPRMF graph) is still alive when the next batch is computed, because losses_list keeps the graph-carrying loss tensors until the epoch ends.
import weakref
import torch
import torch.nn as nn
import torch.optim as optim


class Interaction(object):
    def __init__(self, interaction):
        self.interaction = interaction

    def __getitem__(self, index):
        return self.interaction[index]

    def to(self, device):
        return Interaction({k: v.to(device) for k, v in self.interaction.items()})


class BPRLoss(nn.Module):
    def __init__(self, gamma=1e-10):
        super(BPRLoss, self).__init__()
        self.gamma = gamma

    def forward(self, pos_score, neg_score):
        loss = - torch.log(self.gamma + torch.sigmoid(pos_score - neg_score)).mean()
        return loss


class GeneralRecommender(nn.Module):
    def __init__(self, config, dataset):
        super(GeneralRecommender, self).__init__()
        self.USER_ID = config['USER_ID_FIELD']
        self.ITEM_ID = config['ITEM_ID_FIELD']
        self.NEG_ITEM_ID = config['NEG_PREFIX'] + self.ITEM_ID
        self.n_users = dataset['n_users']
        self.n_items = dataset['n_items']
        self.device = config['device']


class BPRMF(GeneralRecommender):
    def __init__(self, config, dataset):
        super(BPRMF, self).__init__(config, dataset)
        self.embedding_size = config['embedding_size']
        self.user_embedding = nn.Embedding(self.n_users, self.embedding_size)
        self.item_embedding = nn.Embedding(self.n_items, self.embedding_size)
        self.loss = BPRLoss()

    def get_user_embedding(self, user):
        return self.user_embedding(user)

    def get_item_embedding(self, item):
        return self.item_embedding(item)

    def forward(self, user, item):
        return self.get_user_embedding(user), self.get_item_embedding(item)

    def calculate_loss(self, interaction):
        user = interaction[self.USER_ID]
        pos_item = interaction[self.ITEM_ID]
        neg_item = interaction[self.NEG_ITEM_ID]
        user_e, pos_e = self.forward(user, pos_item)
        neg_e = self.get_item_embedding(neg_item)
        pos_item_score, neg_item_score = torch.mul(user_e, pos_e).sum(dim=1), torch.mul(user_e, neg_e).sum(dim=1)
        loss = self.loss(pos_item_score, neg_item_score)
        return loss


class AbstractTrainer(object):
    def __init__(self, config, model):
        self.config = config
        self.model = model


class Trainer(AbstractTrainer):
    def __init__(self, config, model):
        super(Trainer, self).__init__(config, model)
        self.learner = config['learner']
        self.learning_rate = config['learning_rate']
        self.epochs = config['epochs']
        self.eval_step = min(config['eval_step'], self.epochs)
        self.device = config['device']
        self.start_epoch = 0
        self.cur_step = 0
        self.optimizer = self._build_optimizer()

    def _build_optimizer(self):
        if self.learner.lower() == 'adam':
            optimizer = optim.Adam(self.model.parameters(), lr=self.learning_rate)
        elif self.learner.lower() == 'sgd':
            optimizer = optim.SGD(self.model.parameters(), lr=self.learning_rate)
        elif self.learner.lower() == 'adagrad':
            optimizer = optim.Adagrad(self.model.parameters(), lr=self.learning_rate)
        elif self.learner.lower() == 'rmsprop':
            optimizer = optim.RMSprop(self.model.parameters(), lr=self.learning_rate)
        else:
            optimizer = optim.Adam(self.model.parameters(), lr=self.learning_rate)
        return optimizer

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        losses_list = []
        for batch_idx, interaction in enumerate(train_data):
            interaction = interaction.to(self.device)
            self.optimizer.zero_grad()
            losses = self.model.calculate_loss(interaction)
            if isinstance(losses, tuple):
                loss = sum(losses)
            else:
                loss = losses
            self._check_nan(loss)
            loss.backward()
            self.optimizer.step()
            losses_list.append(losses)
        if isinstance(losses_list[0], tuple):
            return tuple(sum(per_loss).item() for per_loss in zip(*losses_list))
        return sum(losses_list).item()

    def _check_nan(self, loss):
        if torch.isnan(loss):
            raise ValueError('Training loss is nan')

    def _generate_train_loss_output(self, epoch_idx, train_loss):
        if isinstance(train_loss, tuple):
            des = ', '.join('train_loss%d: %.4f' % (idx + 1, l) for idx, l in enumerate(train_loss))
        else:
            des = 'train loss: %.4f' % train_loss
        return 'epoch %d training [%s]' % (epoch_idx, des)

    def fit(self, train_data, valid_data=None, verbose=True):
        for epoch_idx in range(self.start_epoch, self.epochs):
            train_loss = self._train_epoch(train_data, epoch_idx)
            train_loss_output = self._generate_train_loss_output(epoch_idx, train_loss)
            if verbose:
                print(train_loss_output)


if __name__ == "__main__":
    torch.manual_seed(0)
    config = {'USER_ID_FIELD': 'user_id', 'ITEM_ID_FIELD': 'item_id', 'NEG_PREFIX': 'neg_',
              'embedding_size': 8, 'learner': 'adam', 'learning_rate': 0.01, 'epochs': 1,
              'eval_step': 1, 'device': torch.device('cpu')}
    dataset = {'n_users': 20, 'n_items': 30}
    train_data = [Interaction({'user_id': torch.randint(0, 20, (16,)), 'item_id': torch.randint(0, 30, (16,)),
                               'neg_item_id': torch.randint(0, 30, (16,))}) for _ in range(6)]
    model = BPRMF(config, dataset)
    trainer = Trainer(config, model)

    seen, alive_at_call = [], []
    calculate_loss = model.calculate_loss

    def recording_calculate_loss(interaction):
        alive_at_call.append(sum(1 for r in seen if r() is not None and r().grad_fn is not None))
        loss = calculate_loss(interaction)
        seen.append(weakref.ref(loss))
        return loss

    model.calculate_loss = recording_calculate_loss
    trainer.fit(train_data)
    assert alive_at_call == [0, 1, 2, 3, 4, 5], alive_at_call
    print("evidence holds: at batch k all k earlier graph-carrying losses were still alive:", alive_at_call)
