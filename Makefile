# The two set-up commands of the README: `make run` and `make test`.
.PHONY: run test stop bench lint

run:
	scripts/run.sh

test:
	scripts/test.sh

stop:
	scripts/stack.sh down run

# Release build, own Postgres/Redis/sink on loopback, baselines and scenarios in one run.
bench:
	cargo build --release --bin hookgate --bin hookgate-bench
	target/release/hookgate-bench

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
