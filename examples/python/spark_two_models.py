"""Two models trained side by side on Spark: one tutti job, two process sets, read from a DataFrame.

The driver makes a DataFrame of (features, label) rows and calls tutti.spark.run, which runs
`train` once per rank in one barrier-mode stage. Each rank reads its partition of the DataFrame
(tutti.spark.partition()), and the ranks split into two process sets, the even and the odd ranks,
each training its own torch model with its own learning rate: DistributedOptimizer averages
gradients only within the rank's set, so the two experiments never wait for each other. The
driver gets each rank's final loss back, by rank.

    python examples/python/spark_two_models.py [--master local-cluster[2,2,1024]] [--num-proc 3]

(with the engines' virtual environment's Python, where pyspark and torch are installed; tutti
must be importable on the executors: absolute paths, since executors run in their own work
directories, e.g. PYTHONPATH=$PWD/python TUTTI_LIBRARY=$PWD/build/libtutti.so.)
"""
import argparse


def train(lrs, epochs):
    """Runs on an executor, as one rank."""
    import os

    import torch
    import torch.nn.functional as F

    import tutti.spark
    import tutti.torch as hvd

    world = int(os.environ["TUTTI_SIZE"])  # static sets are given to init, before hvd.size()
    evens, odds = hvd.ProcessSet(range(0, world, 2)), hvd.ProcessSet(range(1, world, 2))
    hvd.init(process_sets=[evens, odds])
    torch.set_num_threads(1)
    mine = evens if evens.included() else odds
    lr = lrs[0] if mine is evens else lrs[1]

    rows = list(tutti.spark.partition())
    x = torch.tensor([row.features for row in rows], dtype=torch.float32)
    y = torch.tensor([row.label for row in rows], dtype=torch.float32).unsqueeze(1)

    torch.manual_seed(hvd.rank())  # different on each rank: the broadcast makes a set agree
    model = torch.nn.Linear(x.shape[1], 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    hvd.broadcast_parameters(model.state_dict(), root_rank=mine.ranks[0], process_set=mine)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         process_set=mine)
    for epoch in range(epochs):
        for batch in torch.arange(len(x)).split(16):
            optimizer.zero_grad()
            loss = F.mse_loss(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
        epoch_loss = hvd.allreduce(F.mse_loss(model(x), y).detach(), process_set=mine,
                                   name="epoch_loss").item()
        if hvd.rank() == mine.ranks[0]:
            print(f"{'even' if mine is evens else 'odd'} set, lr {lr}: epoch {epoch + 1} "
                  f"loss {epoch_loss:.4f}")
    # The members of a set hold the same model: its weights are the set's result.
    return {"set": "even" if mine is evens else "odd", "lr": lr, "loss": epoch_loss,
            "weight": model.weight.detach().flatten().tolist()}


def make_data(spark, samples=512, features=4):
    """y = x . (1, -2, 3, 0.5) + noise, as a DataFrame of (features, label)."""
    import random
    rng = random.Random(1234)
    truth = [1.0, -2.0, 3.0, 0.5][:features]
    rows = []
    for _ in range(samples):
        x = [rng.gauss(0, 1) for _ in range(features)]
        rows.append((x, sum(a * b for a, b in zip(x, truth)) + rng.gauss(0, 0.01)))
    return spark.createDataFrame(rows, ["features", "label"])


def main(spark, num_proc=3, epochs=5, lrs=(0.01, 0.1)):
    import tutti.spark
    results = tutti.spark.run(train, args=(list(lrs), epochs), num_proc=num_proc,
                              data=make_data(spark))
    for rank, result in enumerate(results):
        print(f"rank {rank}: {result['set']} set, lr {result['lr']}, final loss "
              f"{result['loss']:.4f}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", default="local-cluster[2,2,1024]")
    parser.add_argument("--num-proc", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lrs", type=float, nargs=2, default=[0.01, 0.1])
    options = parser.parse_args()
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master(options.master).appName("tutti two models")
               .config("spark.ui.enabled", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    try:
        main(session, options.num_proc, options.epochs, options.lrs)
    finally:
        session.stop()
