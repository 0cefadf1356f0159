# source: https://github.com/victorgabillon/chipiron/blob/6cac66bde136479c069b4236c93c353030966e0c/chipiron/players/boardevaluators/neural_networks/nn_board_evaluator.py
# category: DL304
# expect: flag 74, 76, 88
# evidence: value_white and evaluate run with grad mode on: every board evaluation returned by the evaluator keeps a grad_fn
from dataclasses import dataclass

import torch
from torch import nn

WHITE, BLACK = True, False


@dataclass
class FloatyBoardEvaluation:
    value_white: float | None
    value_white_tensor: torch.Tensor | None = None


@dataclass
class Board:
    pieces: torch.Tensor
    turn: bool


class ChiNN(nn.Module):
    def __init__(self, input_size=12, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden)
        self.fc2 = nn.Linear(hidden, 1)

    def forward(self, x):
        return torch.tanh(self.fc2(torch.relu(self.fc1(x))))


class OutputValueConverter:
    def to_board_evaluation(self, output_nn: torch.Tensor, color_to_play: bool) -> FloatyBoardEvaluation:
        value = output_nn.squeeze(-1)
        value_white = value if color_to_play == WHITE else -value
        return FloatyBoardEvaluation(value_white=float(value_white.mean()), value_white_tensor=value_white)


def board_to_input(board: Board) -> torch.Tensor:
    return board.pieces.float().unsqueeze(0)


class NNBoardEvaluator:
    """
    The Generic Neural network class for board evaluation

    Attributes:
        net (ChiNN): The neural network model
        output_and_value_converter (OutputValueConverter): The converter for output values
        board_to_input_converter (BoardToInputFunction): The converter for board to input tensor
    """

    def __init__(self, net: ChiNN, output_and_value_converter: OutputValueConverter, board_to_input_convert) -> None:
        self.net = net
        self.my_scripted_model = net
        self.output_and_value_converter = output_and_value_converter
        self.board_to_input_convert = board_to_input_convert

    def value_white(self, board: Board) -> FloatyBoardEvaluation:
        """
        Evaluate the value for the white player

        Args:
            board (Board): The chess board

        Returns:
            FloatyBoardEvaluation: the evaluation, whose value_white is the value for the white player
        """
        self.my_scripted_model.eval()
        input_layer: torch.Tensor = self.board_to_input_convert(board)
        torch.no_grad()
        output_layer: torch.Tensor = self.my_scripted_model(input_layer)
        torch.no_grad()
        board_evaluation: FloatyBoardEvaluation = self.output_and_value_converter.to_board_evaluation(
            output_nn=output_layer, color_to_play=board.turn
        )
        assert board_evaluation.value_white is not None
        return board_evaluation

    def evaluate(self, input_layer: torch.Tensor, color_to_play: bool) -> FloatyBoardEvaluation:
        """
        Evaluate the board position for a batch of input layers
        """
        self.my_scripted_model.eval()
        torch.no_grad()

        # run the batch of input_converters into the NN and get the batch of output_converters
        output_layer = self.my_scripted_model(input_layer)

        # translate the NN output batch into a proper Board Evaluations classes in a list
        board_evaluations = self.output_and_value_converter.to_board_evaluation(
            output_nn=output_layer, color_to_play=color_to_play
        )
        return board_evaluations


if __name__ == "__main__":
    torch.manual_seed(0)
    evaluator = NNBoardEvaluator(ChiNN(), OutputValueConverter(), board_to_input)
    board = Board(pieces=torch.randint(0, 2, (12,)), turn=WHITE)

    single = evaluator.value_white(board)
    assert single.value_white_tensor.grad_fn is not None

    batch = torch.randint(0, 2, (32, 12)).float()
    batch_eval = evaluator.evaluate(batch, color_to_play=BLACK)
    assert batch_eval.value_white_tensor.requires_grad and batch_eval.value_white_tensor.grad_fn is not None
    assert torch.is_grad_enabled()
    print("evidence holds: the bare torch.no_grad() calls change nothing; both evaluations carry a grad_fn")
