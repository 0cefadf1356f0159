# source: https://github.com/graytowne/revisit_adv_rec/issues/3
# category: DL502
# expect: flag 111, 130
# evidence: WMFTrainer.train_als writes the ALS solution into the nn.Parameter with model.P[user] = ...; the in-place write on a leaf that requires grad raises "a view of a leaf Variable that requires grad is being used in an in-place operation".
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)
np.random.seed(0)


class Bunch(dict):
    def __getattr__(self, k):
        return self[k]


def sparse2tensor(sparse_data):
    """Dense stand-in for utils.sparse2tensor (rows of a user-item matrix)."""
    return torch.FloatTensor(np.atleast_2d(np.asarray(sparse_data)))


def _array2sparsediag(x):
    values = x
    indices = np.vstack([np.arange(x.size), np.arange(x.size)])

    i = torch.LongTensor(indices)
    v = torch.FloatTensor(values)
    shape = [x.size, x.size]

    return torch.sparse_coo_tensor(i, v, torch.Size(shape))


class WeightedMF(nn.Module):
    def __init__(self, n_users, n_items, model_args):
        super(WeightedMF, self).__init__()

        hidden_dims = model_args.hidden_dims
        if len(hidden_dims) > 1:
            raise ValueError("WMF can only have one latent dimension.")

        self.n_users = n_users
        self.n_items = n_items
        self.dim = hidden_dims[0]

        self.Q = nn.Parameter(
            torch.zeros([self.n_items, self.dim]).normal_(mean=0, std=0.1))
        self.P = nn.Parameter(
            torch.zeros([self.n_users, self.dim]).normal_(mean=0, std=0.1))
        self.params = nn.ParameterList([self.Q, self.P])

    def forward(self, user_id=None, item_id=None):
        if user_id is None and item_id is None:
            return torch.mm(self.P, self.Q.t())
        if user_id is not None:
            return torch.mm(self.P[[user_id]], self.Q.t())
        if item_id is not None:
            return torch.mm(self.P, self.Q[[item_id]].t())


class WMFTrainer:
    def __init__(self, n_users, n_items, args):
        self.args = args
        self.device = torch.device("cuda" if self.args.use_cuda else "cpu")
        self.n_users = n_users
        self.n_items = n_items

    def _initialize(self):
        model_args = Bunch(self.args.model)
        if "optim_method" not in model_args:
            model_args["optim_method"] = "sgd"
        self.net = WeightedMF(
            n_users=self.n_users, n_items=self.n_items,
            model_args=model_args).to(self.device)

        self.optimizer = optim.Adam(self.net.parameters(), lr=self.args.lr,
                                    weight_decay=self.args.l2)

        self.optim_method = model_args.optim_method
        self.weight_alpha = self.args.model["weight_alpha"]
        self.dim = self.net.dim

    def train_als(self, data):
        model = self.net  # A warning will raise if use .to() method here.
        P = model.P.detach()
        Q = model.Q.detach()

        weight_alpha = self.weight_alpha - 1
        # Using PyTorch for ALS optimization
        # Update P
        lamda_eye = torch.eye(self.dim).to(self.device) * self.args.l2
        # residual = Q^tQ + lambda*I
        residual = torch.mm(Q.t(), Q) + lamda_eye
        for user, batch_data in enumerate(data):
            # x_u: N x 1
            x_u = sparse2tensor(batch_data).to(self.device).t()
            # Cu = diagMat(alpha * rating + 1)
            cu = batch_data.squeeze() * weight_alpha + 1
            Cu = _array2sparsediag(cu).to(self.device)
            Cu_minusI = _array2sparsediag(cu - 1).to(self.device)
            # Q^tCuQ + lambda*I = Q^tQ + lambda*I + Q^t(Cu-I)Q
            # left hand side
            lhs = torch.mm(Q.t(), Cu_minusI.mm(Q)) + residual
            # right hand side
            rhs = torch.mm(Q.t(), Cu.mm(x_u))

            new_p_u = torch.mm(lhs.inverse(), rhs)
            model.P[user] = new_p_u.t()

        # Update Q
        data = data.transpose()
        # residual = P^tP + lambda*I
        residual = torch.mm(P.t(), P) + lamda_eye
        for item, batch_data in enumerate(data):
            # x_v: M x 1
            x_v = sparse2tensor(batch_data).to(self.device).t()
            # Cv = diagMat(alpha * rating + 1)
            cv = batch_data.squeeze() * weight_alpha + 1
            Cv = _array2sparsediag(cv).to(self.device)
            Cv_minusI = _array2sparsediag(cv - 1).to(self.device)
            # left hand side
            lhs = torch.mm(P.t(), Cv_minusI.mm(P)) + residual
            # right hand side
            rhs = torch.mm(P.t(), Cv.mm(x_v))

            new_q_v = torch.mm(lhs.inverse(), rhs)
            model.Q[item] = new_q_v.t()

        return 0

    def fit_adv_als(self, data_tensor, epoch_num):
        train_data = data_tensor.detach().numpy()
        for i in range(1, epoch_num + 1):
            t1 = time.time()
            self.train_als(data=train_data)
            print("Training [{:.1f} s], epoch: {}".format(time.time() - t1, i))


if __name__ == "__main__":
    args = Bunch(use_cuda=False, lr=1e-3, l2=1e-2,
                 model={"hidden_dims": [4], "optim_method": "als", "weight_alpha": 20})
    trainer = WMFTrainer(n_users=6, n_items=8, args=args)
    trainer._initialize()
    data_tensor = (torch.rand(6, 8) > 0.6).float().requires_grad_()
    try:
        trainer.fit_adv_als(data_tensor, epoch_num=1)
        raise AssertionError("ALS update unexpectedly worked")
    except RuntimeError as e:
        msg = str(e)
    assert "leaf Variable that requires grad is being used in an in-place operation" in msg, msg
    print("evidence holds:", msg)
