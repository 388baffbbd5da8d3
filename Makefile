# omnibus — run `make` for the list of targets.

# A fresh machine may have Go where its official tarball puts it without
# having it on PATH; the JS tests' harness runs `go build` too, so export it.
ifeq ($(shell command -v go 2>/dev/null),)
export PATH := /usr/local/go/bin:$(PATH)
endif

GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 10s
# Every JS test package: amqpserver/jstest (the stable SDK), jstest-beta (the
# SDK beta's newer operations), httpgw/jstest, and any further jstest-* dir.
JSDIRS    := $(patsubst %/package.json,%,$(wildcard amqpserver/jstest*/package.json httpgw/jstest*/package.json))
# The Java tests: one Maven project, two suites on one harness: the Java
# SDK's (package omnibus) and JMS 2.0 through Apache Qpid JMS, as Service
# Bus Premium serves it (omnibus.jms). Maven runs quietly so CI logs stay
# short. Debian's Maven 3.8.7 prints colour resets even in batch mode, so
# its output goes through sed (and its exit status through a file).
JAVADIR   := amqpserver/javatest
MVN       = { mvn -q -B $(1) 2>&1; echo $$? > target/.mvn-rc; } | sed 's/\x1b\[[0-9;]*m//g'; exit $$(cat target/.mvn-rc)
# $(call JAVASUITE,classes,name): runs the test classes matching the
# surefire pattern, then prints one "name: N passed, N failed, N skipped"
# line from their reports; exits with Maven's status.
JAVASUITE = cd $(JAVADIR) && rm -rf target/surefire-reports && mkdir -p target && { ($(call MVN,test -Dtest='$(1)')); rc=$$?; \
	  cat target/surefire-reports/TEST-*.xml 2>/dev/null | grep -o '<testsuite [^>]*>' | \
	    awk '{ for (i = 1; i <= NF; i++) { split($$i, kv, "="); gsub(/"/, "", kv[2]); n[kv[1]] += kv[2] } } \
	      END { printf "$(2): %d passed, %d failed, %d skipped\n", n["tests"] - n["failures"] - n["errors"] - n["skipped"], n["failures"] + n["errors"], n["skipped"] }'; \
	  exit $$rc; }

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# Release builds: static (no cgo), without symbol tables, stamped with the
# version and commit `omnibus --version` prints.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
STATIC    := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
HOSTARCH  := $(shell $(GO) env GOARCH)
ARCH      ?= $(HOSTARCH)
# The image: podman (or buildah, or docker) builds it from
# cmd/omnibus/image/Containerfile; ARCH=arm64 cross-builds the other
# architecture (no emulator needed: nothing runs during the build).
IMAGE     ?= localhost/omnibus:latest
IMAGE_TAG := $(if $(filter $(ARCH),$(HOSTARCH)),$(IMAGE),$(IMAGE)-$(ARCH))
CONTAINER ?= $(shell command -v podman || command -v buildah || command -v docker)

build: ## build the broker (bin/omnibus: static, stamped with the version) and the tools (bin/omnibus-tools: conformance, bench, soaks)
	$(STATIC) -o bin/omnibus ./cmd/omnibus
	$(GO) build -o bin/omnibus-tools ./cmd/omnibus-tools

image: ## build the container image for this machine (ARCH=arm64 or amd64 for the other), tagged IMAGE (localhost/omnibus:latest)
	@[ -n "$(CONTAINER)" ] || { echo "make image: needs podman, buildah or docker (Debian: apt-get install podman)"; exit 1; }
	rm -rf bin/image && mkdir -p bin/image/data
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/image/omnibus-linux-$(ARCH) ./cmd/omnibus
	cp cmd/omnibus/image/Containerfile bin/image/
	$(CONTAINER) build --platform linux/$(ARCH) --build-arg TARGETARCH=$(ARCH) -t $(IMAGE_TAG) -f bin/image/Containerfile bin/image
	@echo "built $(IMAGE_TAG) (linux/$(ARCH))"

# podman in a sandbox that may not raise rlimits or use crun on hybrid
# cgroups runs with runc and the limits it already has (see
# cmd/omnibus/README.md, "The image"); TestImage does the same.
imagetest: image ## build the image, then run it as the emulator's users do: TestImage (config mount, ready line, SDK send/receive, restart, non-root, size) and testcontainers-go's servicebus module (image/tctest)
	OMNIBUS_IMAGE=$(IMAGE_TAG) $(GO) test -count=1 -run '^TestImage' ./cmd/omnibus/
	cd cmd/omnibus/image/tctest && OMNIBUS_IMAGE=$(IMAGE_TAG) $(GO) test -count=1 .

DIST_TARGETS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
dist: ## cross-compile release binaries (linux, darwin, windows; amd64, arm64) into dist/ with SHA256SUMS
	rm -rf dist && mkdir dist
	@for t in $(DIST_TARGETS); do os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  echo "== $$os/$$arch"; \
	  GOOS=$$os GOARCH=$$arch $(STATIC) -o dist/omnibus-$(VERSION)-$$os-$$arch$$ext ./cmd/omnibus || exit 1; \
	done
	cd dist && sha256sum omnibus-* > SHA256SUMS && cat SHA256SUMS

run: ## run the broker with its defaults (data in ./omnibus-data, AMQP :5672, HTTP :5300)
	$(GO) run ./cmd/omnibus

test: jsdeps pydeps javadeps imagedeps lint gotest allocs jstest javatest jmstest jstest-cluster imagetest conformance conformance-cluster ## everything CI runs (installing what the JS, Python and Java SDK tests and the image test need first): lint, Go tests with -race, allocation counts, JS, Java SDK and JMS tests, the image, conformance
	@echo "make test: all green"

gotest: pydeps ## Go tests, with the race detector (TestPythonSDK and TestPythonSDKCurrent run the Python SDKs' tests in amqpserver/pytest, TestProtonTransactions Qpid Proton's in amqpserver/protontest)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

# The allocation budgets of ./amqpserver (fuzz_test.go: the fuzz targets'
# seeds, real SDK traffic, hostile values; and the counts of the hot
# path's pieces) are not all named "Alloc", and the package's other tests
# are slow: AMQPSERVER_ALLOCS names them, and the recipe fails if it
# does not run them all.
AMQPSERVER_ALLOCS := ^(FuzzConn|FuzzConnUnauthenticated|TestSDKTrafficWithinBudget|TestHostileValuesAnswerDecodeError|TestPlainPropertiesAllocatesNothing|TestEncodeDeliveryAllocatesItsBytes|TestEncodePulledSharesHeads|TestSendBatchReservedGrowsNoMore)$$
allocs: ## allocation-count tests, without -race (whose runtime allocates on its own, so they skip there)
	$(GO) test -count=1 -run 'Alloc' ./core/... ./amqpserver/internal/... ./cmd/omnibus/clusterrpc/
	@out=$$($(GO) test -count=1 -v -run '$(AMQPSERVER_ALLOCS)' ./amqpserver/ 2>&1); st=$$?; \
	  echo "$$out" | grep -E '^(--- |ok|FAIL|panic)|_test.go:'; \
	  [ $$st = 0 ] || exit $$st; \
	  n=$$(echo "$$out" | grep -c '^--- PASS'); \
	  [ "$$n" = 8 ] || { echo "make allocs: ./amqpserver ran $$n of its 8 allocation tests (renamed?)"; exit 1; }

short: ## Go tests without -race (quick)
	$(GO) test -count=1 $(PKGS)

jstest: jsdeps ## official JavaScript SDK tests against a broker started by the tests
	@for d in $(JSDIRS); do echo "== $$d"; (cd $$d && npm test) || exit 1; done

# JSCLUSTER_FILES: the amqpserver/jstest files jstest-cluster runs; all
# those that assume no single-broker flags pass against a cluster
# (make jstest-cluster JSCLUSTER_FILES='$(JSCLUSTER_ALL)', about 2 minutes: a cluster per file).
JSCLUSTER_FILES ?= partitions.test.mjs
JSCLUSTER_ALL := partitions.test.mjs queue.test.mjs sessions.test.mjs topics.test.mjs settle.test.mjs peek-schedule.test.mjs properties.test.mjs admin.test.mjs
jstest-cluster: jsdeps ## the JavaScript SDK's partitioned-entity tests (JSCLUSTER_FILES) against a 3-node cluster with 3 data groups (peer TLS from cluster init and join tokens; senders on node 2, receivers on node 3, admin on node 1)
	cd amqpserver/jstest && OMNIBUS_JSTEST_CLUSTER=3 node --test $(JSCLUSTER_FILES)

# npm ci runs when node_modules is missing or was installed from another
# package-lock.json (a copy of the one installed from is kept beside it);
# node and npm come from Debian's packages when absent, as on a fresh CI
# machine.
jsdeps: browserdeps ## install what the JS SDK tests need: node and npm (apt) if absent, `npm ci` where node_modules is missing or stale
	@for d in $(JSDIRS); do \
	  if cmp -s $$d/package-lock.json $$d/node_modules/.omnibus-installed-lock.json; then continue; fi; \
	  if ! command -v npm >/dev/null 2>&1; then \
	    echo "== installing nodejs and npm (apt-get)"; \
	    sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	    $$sudo apt-get update -qq && $$sudo apt-get install -y -qq nodejs npm >/dev/null || \
	      { echo "make jsdeps: node and npm are missing and apt-get could not install them"; exit 1; }; \
	  fi; \
	  echo "== npm ci in $$d"; \
	  (cd $$d && npm ci --no-audit --no-fund && cp package-lock.json node_modules/.omnibus-installed-lock.json) || exit 1; \
	done

# The Java tests (amqpserver/javatest) need a JDK 17 and Maven, from
# Debian's packages when absent, and their dependencies in the user's Maven
# repository (~/.m2), fetched when the pom.xml changed since the last fetch
# (a copy of the one fetched for is kept in target/, like jsdeps' lock copy).
# Running a test filter that matches nothing compiles the tests and fetches
# everything `mvn test` needs, surefire's JUnit provider included.
javadeps: ## install what the Java SDK and JMS tests need: JDK 17 and Maven (apt) if absent, their dependencies into ~/.m2 when pom.xml changed
	@if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then \
	  echo "== installing openjdk-17-jdk-headless and maven (apt-get)"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null || \
	    { echo "make javadeps: a JDK or Maven is missing and apt-get could not install them"; exit 1; }; \
	fi
	@if ! cmp -s $(JAVADIR)/pom.xml $(JAVADIR)/target/.omnibus-resolved-pom.xml; then \
	  echo "== fetching the Java tests' dependencies into ~/.m2 (mvn)"; \
	  (cd $(JAVADIR) && mkdir -p target && ($(call MVN,test -Dtest=NoSuchTest -Dsurefire.failIfNoSpecifiedTests=false)) && \
	    cp pom.xml target/.omnibus-resolved-pom.xml) || exit 1; \
	fi

javatest: javadeps ## official Java SDK tests (azure-messaging-servicebus, JUnit 5) against brokers started by the tests
	@$(call JAVASUITE,omnibus/*Test,javatest)

jmstest: javadeps ## JMS 2.0 tests (Apache Qpid JMS, JUnit 5): queues, topics, durable and shared subscriptions, selectors, temporary queues, transactions
	@$(call JAVASUITE,omnibus/jms/*Test,jmstest)

# The browser test (amqpserver/jstest-browser) drives Debian's Chromium and
# trusts omnibus's CA through an NSS database made with certutil; no browser
# is ever downloaded by npm.
browserdeps: ## install Debian's chromium and libnss3-tools (certutil) for the browser test, if absent
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/certutil ]; then \
	  echo "== installing chromium and libnss3-tools (apt-get)"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium libnss3-tools >/dev/null || \
	    { echo "make browserdeps: chromium or certutil is missing and apt-get could not install them"; exit 1; }; \
	fi

# The Python SDK tests (amqpserver/pytest, run by amqpserver's TestPythonSDK)
# use Debian's python3-azure (azure-servicebus 7.8 on uamqp 1.5); the
# transaction tests (amqpserver/protontest, run by cmd/omnibus's
# TestProtonTransactions) use Debian's python3-qpid-proton. Only
# /usr/bin/python3 imports them.
pydeps: pyvenv ## install what the Python tests need: Debian's python3-azure and python3-qpid-proton (apt) if /usr/bin/python3 cannot import them
	@if ! /usr/bin/python3 -c 'import azure.servicebus, uamqp, proton' >/dev/null 2>&1; then \
	  echo "== installing python3-azure and python3-qpid-proton (apt-get)"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq python3-azure python3-qpid-proton >/dev/null || \
	    { echo "make pydeps: apt-get could not install python3-azure and python3-qpid-proton"; exit 1; }; \
	fi

# Today's Python SDK (azure-servicebus 7.15 on its pure-Python AMQP stack,
# run by amqpserver's TestPythonSDKCurrent) and the beta with batch delete
# (7.13.0b1) live in virtual environments made from the machine's python3
# (Debian's python3-venv installed when it cannot make one). Each is made
# anew when its requirements file (exact versions with their hashes)
# differs from the copy kept inside it, as jsdeps does with package-lock.
PYVENVS   := amqpserver/pytest/.venv:amqpserver/pytest/requirements.txt amqpserver/pytest/.venv-beta:amqpserver/pytest/requirements-beta.txt
pyvenv: ## make the Python SDK 7.15 (and 7.13 beta) virtual environments in amqpserver/pytest when missing or stale
	@for pair in $(PYVENVS); do venv=$${pair%%:*}; req=$${pair#*:}; \
	  if cmp -s $$req $$venv/.omnibus-installed-requirements.txt; then continue; fi; \
	  py=$$(command -v python3 || echo /usr/bin/python3); \
	  if ! $$py -c 'import venv, ensurepip' >/dev/null 2>&1; then \
	    echo "== installing python3-venv (apt-get)"; \
	    sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	    $$sudo apt-get update -qq && $$sudo apt-get install -y -qq python3-venv >/dev/null || \
	      { echo "make pyvenv: $$py cannot make a virtual environment and apt-get could not install python3-venv"; exit 1; }; \
	    py=/usr/bin/python3; \
	  fi; \
	  echo "== making $$venv from $$req ($$($$py --version))"; \
	  rm -rf $$venv && $$py -m venv $$venv && \
	    $$venv/bin/pip install -q --disable-pip-version-check --require-hashes --only-binary :all: -r $$req && \
	    cp $$req $$venv/.omnibus-installed-requirements.txt || exit 1; \
	done

# The image test (make imagetest) builds and runs the image with podman;
# runc because crun refuses the hybrid cgroup hierarchies of some machines.
imagedeps: ## install podman and runc (apt) if absent, for make image and make imagetest
	@if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then \
	  echo "== installing podman and runc (apt-get)"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null || \
	    { echo "make imagedeps: apt-get could not install podman and runc"; exit 1; }; \
	fi

lint: ## gofmt, go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fuzz: ## run every fuzz target for FUZZTIME each
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; done

conformance: ## conformance suite against an in-process omnibus (and the fault-injected one)
	$(GO) run ./cmd/omnibus-tools conformance --format text
	$(GO) run ./cmd/omnibus-tools conformance --prove-failure --format text

conformance-cluster: ## conformance suite against an in-process 3-node cluster with 3 data groups (peer TLS), each scenario sending through one node and receiving through another (about 35 s)
	$(GO) run ./cmd/omnibus-tools conformance --cluster 3 --groups 3 --format text

KILLS ?= 18
DISK_FAULTS ?= 2
soak: build ## crash soak: SIGKILL the real binary under load KILLS times (18) and fail its disk DISK_FAULTS times (2: every send in flight answered, SIGTERM ends it within 5 s with status 1), restart it on the same data each time, account for every message (SOAK_FLAGS=--subscriptions 2 for a topic)
	bin/omnibus-tools soak --binary bin/omnibus --kills $(KILLS) --disk-faults $(DISK_FAULTS) $(SOAK_FLAGS)

FAILOVERS ?= 12
MAX_FAILOVER ?= 3s
SESSIONS ?= 8
cluster-test: build ## failover soak: 3 nodes under SDK load, the leader SIGKILLed, cut off (network namespaces as root) or SIGSTOPped in turn FAILOVERS times (12), every message accounted, each failover's first acknowledged send within MAX_FAILOVER (3s; 0 reports only); then the same with 3 data groups (--groups 3), every fault kind on the meta leader and on another node, half the load on a partitioned queue spread over the groups with per-key order checked, SESSIONS (8; 0 leaves them out) sessions on a partitioned queue with sessions (CLUSTER_FLAGS="--backlog 100000 --hold-receivers": every failover with 100k queued)
	bin/omnibus-tools cluster-soak --binary bin/omnibus --failovers $(FAILOVERS) --max-failover $(MAX_FAILOVER) $(CLUSTER_FLAGS)
	bin/omnibus-tools cluster-soak --binary bin/omnibus --groups 3 --sessions $(SESSIONS) --failovers $(FAILOVERS) --max-failover $(MAX_FAILOVER) $(CLUSTER_FLAGS)

cluster-scale: build ## a cluster with data groups against one group, each node held to CPU=0.2 cores by cgroup v1 cpu.cfs_quota_us (root): send+receive rate and CPU per message per node, 3 and 5 nodes (NODES, CPU, WARMUP, DURATION, QUEUES_PER_NODE, ROUNDS: pairs alternated, with their median; SCENARIO=partitioned: one partitioned queue spread over the groups, clients on every node, CLIENTS_PER_NODE, KEYS)
	bash cmd/omnibus/bench/cluster_scale.sh
.PHONY: cluster-scale

cluster-replicated: build ## the replicated send against a single node: bench --scenario send (1 KiB, durable, 100 in flight) on one node and through a 3-node cluster's leader, alternated PAIRS=5 times; rate and CPU per message per node
	bash cmd/omnibus/bench/replicated.sh
.PHONY: cluster-replicated

bench: ## Go benchmarks of core, storage and the fronts
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./core/ ./storage/... ./amqpserver/ ./httpgw/

compare: ## omnibus vs RabbitMQ with `omnibus-tools bench` (installs rabbitmq-server if missing; BACKLOG=100000 for a quick run; CPUS=split pins broker and load generator apart)
	bash cmd/omnibus/bench/compare.sh
.PHONY: compare

# BASE=path/to/another/omnibus adds a second broker, interleaved with this
# tree's, for before/after pairs (build it with CGO_ENABLED=0, as here).
hotpath: ## broker CPU and instructions (valgrind) per send and per delivery + completion, 12 B / 1 KiB / 64 KiB, gathered and direct writes (cmd/omnibus/bench/hotpath.sh)
	CGO_ENABLED=0 $(GO) build -o bin/omnibus-hotpath ./cmd/omnibus
	bash cmd/omnibus/bench/hotpath.sh $(BASE) bin/omnibus-hotpath
.PHONY: hotpath

check: test ## alias of test

.PHONY: help build image imagetest imagedeps dist run test gotest allocs short jstest jstest-cluster jsdeps javatest javadeps jmstest browserdeps pydeps pyvenv lint fuzz conformance conformance-cluster soak cluster-test bench check
