# source: https://github.com/kevinzakka/torchnca/issues/5
# category: DL501
# expect: flag 43, 46, 99
# evidence: _init_transformation wraps A in nn.Parameter and only then moves it with .to(self.device); the moved tensor is a non-leaf copy, so torch.optim.SGD([self.A]) raises "can't optimize a non-leaf Tensor" (and A.grad would stay None).
import numpy as np
import torch


class NCA:
  """Neighbourhood Components Analysis [1].

  References:
    [1]: https://www.cs.toronto.edu/~hinton/absps/nca.pdf
  """
  def __init__(self, dim=None, init="random", max_iters=500, tol=1e-5):
    self.dim = dim
    self.init = init
    self.max_iters = max_iters
    self.tol = tol
    self._mean = None
    self._stddev = None
    self._losses = None

  def __call__(self, X):
    """Apply the learned linear map to the input.
    """
    if self._mean is not None and self._stddev is not None:
      X = (X - self._mean) / self._stddev
    return torch.mm(X, torch.t(self.A))

  def _device_copy(self):
    # The reporter trained on a GPU, where .to(device) copies the tensor.
    # On this CPU-only check the same copy is forced with copy=True.
    return dict(copy=not torch.cuda.is_available())

  def _init_transformation(self):
    """Initialize the linear transformation A.
    """
    if self.dim is None:
      self.dim = self.num_dims
    if self.init == "random":
      a = torch.randn(self.dim, self.num_dims) * 0.01
      self.A = torch.nn.Parameter(a).to(self.device, **self._device_copy())
    elif self.init == "identity":
      a = torch.eye(self.dim, self.num_dims)
      self.A = torch.nn.Parameter(a).to(self.device, **self._device_copy())
    else:
      raise ValueError("[!] {} initialization is not supported.".format(self.init))

  @staticmethod
  def _pairwise_l2_sq(x):
    """Compute pairwise squared Euclidean distances.
    """
    dot = torch.mm(x.double(), torch.t(x.double()))
    norm_sq = torch.diag(dot)
    dist = norm_sq[None, :] - 2*dot + norm_sq[:, None]
    dist = torch.clamp(dist, min=0)  # replace negative values with 0
    return dist.float()

  @staticmethod
  def _softmax(x):
    exp = torch.exp(x)
    return exp / exp.sum(dim=1)

  def loss(self, X, y_mask):
    embedding = torch.mm(X, torch.t(self.A))
    distances = self._pairwise_l2_sq(embedding)
    distances = distances + torch.diag(torch.full((len(distances),), float("inf")))
    p_ij = self._softmax(-distances)
    p_ij_mask = p_ij * y_mask.float()
    p_i = p_ij_mask.sum(dim=1)
    classification_loss = -torch.log(torch.masked_select(p_i, p_i != 0)).sum()
    return classification_loss

  def train(self, X, y, batch_size=None, lr=1e-4, momentum=0.9, weight_decay=10, normalize=True):
    """Trains NCA until convergence.
    """
    self._losses = []
    self.num_train, self.num_dims = X.shape
    self.device = torch.device("cuda" if X.is_cuda else "cpu")
    if batch_size is None:
      batch_size = self.num_train
    batch_size = min(batch_size, self.num_train)

    # initialize the linear transformation matrix A
    self._init_transformation()

    # zero-mean the input data
    if normalize:
      self._mean = X.mean(dim=0)
      self._stddev = X.std(dim=0)
      X = (X - self._mean) / self._stddev

    optim_args = {
      'lr': lr,
      'weight_decay': weight_decay,
      'momentum': momentum,
    }
    optimizer = torch.optim.SGD([self.A], **optim_args)
    iters_per_epoch = int(np.ceil(self.num_train / batch_size))
    for epoch in range(self.max_iters):
      rand_idxs = torch.randperm(len(y))  # shuffle dataset
      X = X[rand_idxs]
      y = y[rand_idxs]
      for i in range(iters_per_epoch):
        X_batch = X[i*batch_size:(i+1)*batch_size]
        y_batch = y[i*batch_size:(i+1)*batch_size]
        y_mask = y_batch[:, None] == y_batch[None, :]
        optimizer.zero_grad()
        loss = self.loss(X_batch, y_mask)
        self._losses.append(loss.item())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
  torch.manual_seed(0)
  X = torch.randn(30, 3)
  y = torch.randint(0, 3, (30,))
  nca = NCA(dim=2, init="identity", max_iters=5)

  try:
    nca.train(X, y, batch_size=10, lr=1e-2)
    raised = None
  except ValueError as e:
    raised = str(e)

  assert raised is not None and "non-leaf" in raised, raised
  assert not nca.A.is_leaf and nca.A.requires_grad
  print("evidence holds: A is a non-leaf after Parameter(...).to(device); the optimizer raised:", raised)
