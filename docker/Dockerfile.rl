# Dask scheduler and workers for LoopTool's RL training (looptool.rl): Debian's python3 with
# python3-distributed, -lz4 (Dask compresses with lz4 when the client has it, and the learner's
# Debian host does), -grpcio, -protobuf and -numpy (the actors' numpy forward pass needs no
# torch), the looptool package with its generated looptool._proto (client/python/build_proto.py),
# staged by docker/build.sh --variant=rl.
# The learner (`python3 -m looptool.rl.train`, which needs python3-torch) runs outside, on a
# host with the repository; docker/compose.yaml shows the fleet.
#   docker run --network=host looptool-rl dask-scheduler --host=127.0.0.1 --port=8786
#   docker run --network=host looptool-rl dask-worker tcp://127.0.0.1:8786 --nthreads=1
# BASE: as docker/Dockerfile (debian:bookworm-slim, or the offline looptool-base).
ARG BASE=debian:bookworm-slim
FROM ${BASE}

RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3 python3-distributed python3-lz4 python3-grpcio python3-protobuf python3-numpy \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/looptool --no-create-home \
      --shell /usr/sbin/nologin looptool \
 && install -d -o looptool -g looptool -m 0750 /var/lib/looptool

COPY python/ /opt/looptool/python/
ENV PYTHONPATH=/opt/looptool/python PYTHONDONTWRITEBYTECODE=1
# Byte-compiled once here (the containers may be read-only); fails the build if an actor's
# imports are missing.
RUN python3 -m compileall -q /opt/looptool/python \
 && python3 -c 'import distributed, looptool.rl.rollout, looptool.rl.cluster'

LABEL org.looptool.image="rl"
USER looptool:looptool
WORKDIR /var/lib/looptool
CMD ["dask-worker", "--help"]
