# The two set-up commands of the README: `make run` and `make test`.
.PHONY: run test stop bench lint

run:
	scripts/run.sh

test:
	scripts/test.sh

stop:
	scripts/stack.sh down run

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
