# source: https://github.com/jostmey/NakedAttention/issues/1
# category: DL401
# expect: flag 115
# evidence: e_train accumulates e_batch (a loss with grad_fn) over the epoch; after one epoch its graph still references every batch's loss graph (one NLL node per batch).
##########################################################################################
# Author: Jared L. Ostmeyer (script shape kept; MNIST loader replaced by random tensors)
##########################################################################################

import torch

torch.manual_seed(0)

##########################################################################################
# Model
##########################################################################################


class SelfAttentionModel(torch.nn.Module):
  def __init__(self, num_steps, num_channels, num_outputs, **kwargs):
    super().__init__(**kwargs)

    # Initialize components for self-attention
    #
    self.K = torch.nn.Parameter((2.0*torch.rand(num_channels, num_channels)-1.0)/num_channels**0.5)
    self.Q = torch.nn.Parameter((2.0*torch.rand(num_channels, num_channels)-1.0)/num_channels**0.5)
    self.V = torch.nn.Parameter((2.0*torch.rand(num_channels, num_channels)-1.0)/num_channels**0.5)

    self.softmax = torch.nn.Softmax(dim=1)

    # Initialize output layer
    #
    self.out = torch.nn.Linear(num_steps*num_channels, num_outputs)

  def forward(self, x):

    batch_size, num_steps, num_channels = x.shape

    # Run self attention
    #
    y = []
    for i in range(batch_size): # Process one sample at a time

      x_i = x[i,:,:]

      x_k_i = torch.matmul(x_i, self.K)
      x_q_i = torch.matmul(x_i, self.Q)
      x_v_i = torch.matmul(x_i, self.V)

      w_i = self.softmax(torch.matmul(x_q_i, x_k_i.T)/num_channels**0.5)
      y_i = torch.matmul(w_i, x_v_i)

      y.append(y_i)
    y = torch.stack(y, axis=0)

    # Flatten output
    #
    y_flat = y.reshape([ batch_size, num_steps*num_channels ])

    # Run output layer
    #
    l = self.out(y_flat)

    return l

##########################################################################################
# Instantiate model, performance metrics, and optimizer.
##########################################################################################

model = SelfAttentionModel(num_steps=4**2, num_channels=1, num_outputs=10)
probability = torch.nn.Softmax(dim=1)

loss = torch.nn.CrossEntropyLoss()
def accuracy(ps, ys):  # stands in for torchmetrics MulticlassAccuracy
  return (ps.argmax(dim=1) == ys).float().mean()

optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

##########################################################################################
# Dataset and data sampler
##########################################################################################

xs_train, ys_train = torch.rand(64, 16, 1), torch.randint(0, 10, (64,))
xs_val, ys_val = torch.rand(32, 16, 1), torch.randint(0, 10, (32,))

dataset_train = torch.utils.data.TensorDataset(xs_train, ys_train)
sampler_train = torch.utils.data.RandomSampler(dataset_train, replacement=True)
loader_train = torch.utils.data.DataLoader(dataset=dataset_train, batch_size=16, sampler=sampler_train, drop_last=True)

##########################################################################################
# Model
##########################################################################################

i_better = -1
e_better = 1.0e8
a_better = 0.0
state_better = {}

# Loop over the dataset for many epochs
#
for i in range(2):

  # Train the model
  #
  model.train()
  e_train = 0.0
  a_train = 0.0
  for xs_batch, ys_batch in iter(loader_train): # Must use `iter` or `enumerate` for efficiency
    ls_batch = model(xs_batch)
    ps_batch = probability(ls_batch) # Model outputs logits that we must convert to probabilities
    e_batch = loss(ls_batch, ys_batch) # CrossEntropyLoss requires logits
    a_batch = accuracy(ps_batch, ys_batch)
    optimizer.zero_grad()
    e_batch.backward()
    optimizer.step()
    e_train += e_batch/len(loader_train) # Accumulate average loss for this epoch
    a_train += a_batch/len(loader_train) # Accumulate average accuracy for this epoch

  # Assess performance on validation data
  #
  model.eval()
  with torch.no_grad():
    ls_val = model(xs_val)
    ps_val = probability(ls_val)
    e_val = loss(ls_val, ys_val)
    a_val = accuracy(ps_val, ys_val)
    if e_val < e_better: # Early stopping check
      i_better = i
      e_better = e_val
      a_better = a_val
      state_better = model.state_dict()

  # Print report
  #
  print(
    'i: '+str(i),
    'e_train: {:.5f}'.format(float(e_train)/0.693)+' bits',
    'a_train: {:.1f}'.format(100.0*float(a_train))+' %',
    'e_val: {:.5f}'.format(float(e_val)/0.693)+' bits',
    'a_val: {:.1f}'.format(100.0*float(a_val))+' %',
    sep='\t', flush=True
  )


if __name__ == "__main__":
  assert e_train.requires_grad and e_train.grad_fn is not None
  seen, stack, n_nll = set(), [e_train.grad_fn], 0
  while stack:
    node = stack.pop()
    if node is None or node in seen:
      continue
    seen.add(node)
    n_nll += type(node).__name__ == "NllLossBackward0"
    stack.extend(n for n, _ in node.next_functions)
  assert n_nll == len(loader_train), n_nll
  print("evidence holds: e_train still references", n_nll, "per-batch loss graphs after the epoch")
