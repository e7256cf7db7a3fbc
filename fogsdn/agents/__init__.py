"""Learning agents: the Gymnasium environments, DQN, RNN training."""
