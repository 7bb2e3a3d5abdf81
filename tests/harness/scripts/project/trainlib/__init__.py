from .model import make_model as make_model


def read_steps(path):
    with open(path) as file:
        return int(file.read())
