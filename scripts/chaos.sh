#!/usr/bin/env bash
# The chaos run (not in CI): a 3-broker Apache Kafka cluster with its own
# KRaft controller, keyed records streaming in for COURIER_CHAOS_SECS
# (default 600) at half the rate Courier reaches there, and a random fault
# every 20-40 s (SIGKILL and restart, SIGSTOP for 10 s, a clean restart,
# leaders moved). At the end every record is checked: exactly one report,
# every success in the log once at its offset, no duplicate, keys in order.
# The result row goes to stderr; docs/kafka-faults.md keeps the last one.
# COURIER_FAULTS_LISTENER=sasl_ssl (SCRAM-SHA-512, sessions renewed every
# 4 s) or ssl runs the producer and the reader over that listener instead
# of PLAINTEXT (the same variable runs the whole fault matrix over it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-tools.sh
export COURIER_KAFKA_LIBS="$PWD/.tools/kafka/libs"
export COURIER_CHAOS_SECS="${COURIER_CHAOS_SECS:-600}"
exec cargo test --locked --test kafka_faults -- --ignored --nocapture --exact chaos
