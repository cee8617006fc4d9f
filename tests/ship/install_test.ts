/**
 * `vpcni install` as an operator runs it: the real CLI in a subprocess, into temp dirs
 * standing for /opt/cni/bin and /etc/cni/net.d. Installing from the image's file tree is in
 * install_image_test.ts.
 *
 * @module
 */
import assert from "node:assert/strict";
import { run } from "../helpers/sh.ts";
import { wrapDetail } from "../../cli/install.ts";
import { PEERS_BIN } from "../helpers/peers.ts";
import { containerdNewestCni, parseContainerdVersion } from "../../cli/runtime_cni.ts";
import { LAUNCHER_FLAGS } from "../../cli/launcher.ts";
import { buildSourceLauncher } from "../../cli/source_launcher.ts";

const repo = new URL("../..", import.meta.url).pathname;
const main = `${repo}main.ts`;

async function vpcni(args: string[], env: Record<string, string> = {}) {
  return await run(["deno", "run", "-A", "--quiet", main, ...args], {
    env: { ...Deno.env.toObject(), NO_COLOR: "1", ...env },
  });
}

async function withDirs(fn: (d: { root: string; bin: string; conf: string }) => Promise<void>) {
  const root = await Deno.makeTempDir({ prefix: "vdr-install-" });
  try {
    await fn({ root, bin: `${root}/opt/cni/bin`, conf: `${root}/etc/cni/net.d/10-vpcni.conflist` });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

function listDir(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  } catch {
    return [];
  }
}

Deno.test("install writes an executable plugin and the conflist, then reports unchanged", async () => {
  await withDirs(async ({ root, bin, conf }) => {
    const args = [
      "install",
      "--bin-dir",
      bin,
      "--conflist-file",
      conf,
      "--chain",
      "portmap,bandwidth",
    ];
    // The chained plugins are there, as on a node that carries the reference plugins.
    await Deno.mkdir(bin, { recursive: true });
    for (const p of ["portmap", "bandwidth"]) {
      await Deno.copyFile(`${PEERS_BIN}/${p}`, `${bin}/${p}`);
    }
    const first = await vpcni(args);
    assert.equal(first.code, 0, first.stderr);
    // With a C compiler here the launcher is a static program: no shell starts per pod.
    assert.match(first.stdout, /binary .*\/vpcni: installed\s+\(launcher program/);
    const head = (await Deno.readFile(`${bin}/vpcni`)).subarray(0, 4);
    assert.deepEqual([...head], [0x7f, 0x45, 0x4c, 0x46], "an ELF executable, not a script");
    // Only the paths themselves may be longer than a terminal (the temp dirs here, a deep
    // checkout); the details go under them, wrapped, and a long path gets a line of its own.
    for (const l of first.stdout.split("\n")) {
      const longPath = (l.includes(root) && !l.includes("(")) || /^ +[^ ]+$/.test(l);
      assert.ok(l.length <= 80 || longPath, `${l.length}: ${l}`);
    }
    assert.match(first.stdout, /conflist .*10-vpcni\.conflist: written/);
    // From source, the CNI verbs run the plugin bundled into one file in the checkout's dist/.
    assert.match(first.stdout, /bundle +\S+\/dist\/vpcni-plugin\.js: (written|unchanged)/);

    // The installed plugin runs from anywhere with kubelet's bare environment.
    const v = await run(["env", "-i", `${bin}/vpcni`, "version", "--json"], { cwd: root });
    assert.equal(v.code, 0, v.stderr);
    assert.equal(JSON.parse(v.stdout).deno, Deno.version.deno);
    const cni = await run(["env", "-i", "CNI_COMMAND=VERSION", `${bin}/vpcni`], {
      cwd: root,
      stdin: '{"cniVersion":"1.1.0"}',
    });
    assert.equal(cni.code, 0, cni.stderr);
    assert.deepEqual(JSON.parse(cni.stdout), {
      cniVersion: "1.1.0",
      supportedVersions: ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"],
    });

    const conflist = JSON.parse(await Deno.readTextFile(conf));
    assert.deepEqual(conflist.plugins.map((p: { type: string }) => p.type), [
      "vpcni",
      "portmap",
      "bandwidth",
    ]);
    assert.equal(conflist.plugins[0].datapath, "ipvlan-l2");
    assert.equal(conflist.plugins[0].mtu, 9001);
    const inode = Deno.statSync(conf).ino;

    const second = await vpcni(args);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, /binary .*: unchanged/);
    assert.match(second.stdout, /bundle .*: unchanged/);
    assert.match(second.stdout, /conflist .*: unchanged/);
    assert.equal(Deno.statSync(conf).ino, inode, "an unchanged file is not rewritten");

    // A changed setting replaces the file by rename (new inode): a reader holding the old
    // file keeps a whole old file, never a half-written one. No temp file is left behind.
    const third = await vpcni([...args.slice(0, 5), "--datapath", "veth"]);
    assert.match(third.stdout, /conflist .*: written/);
    assert.notEqual(Deno.statSync(conf).ino, inode);
    assert.deepEqual(listDir(`${root}/etc/cni/net.d`), ["10-vpcni.conflist"]);
    assert.deepEqual(listDir(bin), ["bandwidth", "portmap", "vpcni"]);
    assert.equal(JSON.parse(await Deno.readTextFile(conf)).plugins[0].datapath, "veth");
  });
});

Deno.test("install --dry-run prints the plan and the conflist and writes nothing", async () => {
  await withDirs(async ({ root, bin, conf }) => {
    const r = await vpcni([
      "install",
      "--bin-dir",
      bin,
      "--conflist-file",
      conf,
      "--service-cidr",
      "10.100.0.0/16",
      "--dry-run",
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /binary .*: would install/);
    assert.match(r.stdout, /bundle .*vpcni-plugin\.js: (would write|unchanged)/);
    assert.match(r.stdout, /conflist .*: would write/);
    assert.match(r.stdout, /"serviceCidrs": \[\s*"10\.100\.0\.0\/16"\s*\]/);
    assert.deepEqual(listDir(root), [], "dry run created nothing");
  });
});

Deno.test("install refuses bad flags by name and changes nothing", async () => {
  await withDirs(async ({ root, bin, conf }) => {
    const base = ["install", "--bin-dir", bin, "--conflist-file", conf];
    const cases: [string[], RegExp][] = [
      [["--mtu", "12000"], /--mtu: "12000" must be an integer from 576 to 9001/],
      [["--datapath", "bridge"], /--datapath: "bridge" is not one of ipvlan-l2, ipvlan-l3s, veth/],
      [
        ["--service-cidr", "10.100.0.0/33"],
        /--service-cidr: "10\.100\.0\.0\/33" is not an IPv4 CIDR/,
      ],
      [["--chain", "portmap,firewall"], /--chain: "firewall" is not one of/],
      [["--conflist", `${root}/missing.json`], /--conflist: cannot read .*missing\.json/],
      [["--config", `${root}/missing.yaml`], /--config: cannot read .*missing\.yaml: no such file/],
      [["--conflist", root], /--conflist: cannot read .*: it is a directory; name a file/],
      [
        ["--cni-version", "9.9.9"],
        /--cni-version: "9\.9\.9" is not a version vpcni speaks; use one of 0\.3\.0, .*1\.1\.0/,
      ],
      [["--mtu"], /^vpcni install: option '--mtu <n>' argument missing\n.*'vpcni install --help'/],
      [["--no-such-flag"], /^vpcni install: unknown option '--no-such-flag'/],
    ];
    for (const [extra, message] of cases) {
      const r = await vpcni([...base, ...extra]);
      assert.equal(r.code, 2, `${extra.join(" ")}: ${r.stdout}`);
      assert.match(r.stderr, message);
    }
    await Deno.writeTextFile(`${root}/file`, "x");
    // A YAML syntax error is named by file:line:column, on one line, with no code excerpt.
    await Deno.writeTextFile(`${root}/bad.yaml`, "cniVersion: 1.0.0\nplugins: [unclosed\n");
    await Deno.writeTextFile(`${root}/empty.json`, "{}");
    for (const flag of ["--conflist", "--config"]) {
      const bad = await vpcni([...base, flag, `${root}/bad.yaml`]);
      assert.equal(bad.code, 2, bad.stderr);
      assert.match(bad.stderr, new RegExp(`^vpcni install: ${flag}: .*bad\\.yaml:3:1: not valid`));
      assert.equal(bad.stderr.trim().split("\n").length, 1, bad.stderr);
    }
    const empty = await vpcni([...base, "--conflist", `${root}/empty.json`]);
    assert.match(empty.stderr, /empty\.json: cniVersion: missing \(string required\)/);
    for (const f of ["bad.yaml", "empty.json"]) await Deno.remove(`${root}/${f}`);
    const notDir = await vpcni(["install", "--bin-dir", `${root}/file`, "--conflist-file", conf]);
    assert.equal(notDir.code, 2);
    assert.match(notDir.stderr, /--bin-dir: .*file exists and is not a directory/);
    assert.deepEqual(listDir(root), ["file"], "nothing was written for any bad flag");
  });
});

Deno.test("install takes the datapath and socket from the daemon config, or a conflist as is", async () => {
  await withDirs(async ({ root, bin, conf }) => {
    await Deno.writeTextFile(
      `${root}/vpcni.yaml`,
      "datapath: veth\nsocketPath: /run/vpcni/other.sock\npools:\n  - name: default\n",
    );
    const r = await vpcni([
      "install",
      "--skip-binary",
      "--bin-dir",
      bin,
      "--conflist-file",
      conf,
      "--config",
      `${root}/vpcni.yaml`,
    ]);
    assert.equal(r.code, 0, r.stderr);
    const main = JSON.parse(await Deno.readTextFile(conf)).plugins[0];
    assert.equal(main.datapath, "veth");
    assert.equal(main.daemonSocket, "/run/vpcni/other.sock");
    assert.deepEqual(listDir(bin), [], "--skip-binary");

    await Deno.writeTextFile(
      `${root}/not-ours.json`,
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "x",
        plugins: [{ type: "bridge" }],
      }),
    );
    const foreign = await vpcni([
      "install",
      "--skip-binary",
      "--bin-dir",
      bin,
      "--conflist-file",
      conf,
      "--conflist",
      `${root}/not-ours.json`,
    ]);
    assert.equal(foreign.code, 2);
    assert.match(foreign.stderr, /no plugin of type "vpcni"/);
    assert.equal(JSON.parse(await Deno.readTextFile(conf)).plugins[0].datapath, "veth");
  });
});

Deno.test("without a C compiler, install writes a /bin/sh launcher that runs the same", async () => {
  await withDirs(async ({ root, bin }) => {
    const r = await vpcni(["install", "--bin-dir", bin, "--skip-conflist"], {
      CC: `${root}/no-such-cc`,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /binary .*\/vpcni: installed\s+\(launcher script/);
    assert.match(await Deno.readTextFile(`${bin}/vpcni`), /^#!\/bin\/sh\n/);
    const v = await run(["env", "-i", `${bin}/vpcni`, "version", "--json"], { cwd: root });
    assert.equal(v.code, 0, v.stderr);
    assert.equal(JSON.parse(v.stdout).deno, Deno.version.deno);
    const cni = await run(["env", "-i", "CNI_COMMAND=VERSION", `${bin}/vpcni`], {
      cwd: root,
      stdin: '{"cniVersion":"1.0.0"}',
    });
    assert.equal(cni.code, 0, cni.stderr);
    assert.equal(JSON.parse(cni.stdout).cniVersion, "1.0.0");
  });
});

Deno.test("the launcher built on the C library runs the plugin and the CLI as the bare one does", async () => {
  const root = await Deno.makeTempDir({ prefix: "vdr-launcher-" });
  try {
    const launch = {
      deno: Deno.execPath(),
      denoDir: Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME") ?? "/root"}/.cache/deno`,
      // main.ts serves CNI verbs too (the install's bundles may not be built yet).
      cniArgs: ["run", ...LAUNCHER_FLAGS, "--config", `${repo}deno.json`, main],
      cliArgs: ["run", ...LAUNCHER_FLAGS, "--config", `${repo}deno.json`, main],
    };
    for (const bare of [false, true]) {
      const built = await buildSourceLauncher(launch, { bare });
      assert.equal(built.form, "program");
      const path = `${root}/vpcni-${bare ? "bare" : "libc"}`;
      await Deno.writeFile(path, built.bytes, { mode: 0o755 });
      const cni = await run(["env", "-i", "CNI_COMMAND=VERSION", path], {
        cwd: root,
        stdin: '{"cniVersion":"0.4.0"}',
      });
      assert.equal(cni.code, 0, cni.stderr);
      assert.equal(JSON.parse(cni.stdout).cniVersion, "0.4.0");
      const v = await run(["env", "-i", path, "version", "--json"], { cwd: root });
      assert.equal(v.code, 0, v.stderr);
      assert.equal(JSON.parse(v.stdout).deno, Deno.version.deno);
      // A Deno that is gone: the CNI error JSON, exit 127.
      const gone = await buildSourceLauncher({ ...launch, deno: `${root}/no-deno` }, { bare });
      await Deno.writeFile(path, gone.bytes, { mode: 0o755 });
      const broken = await run(["env", "-i", "CNI_COMMAND=ADD", path], { cwd: root, stdin: "{}" });
      assert.equal(broken.code, 127);
      assert.equal(JSON.parse(broken.stdout).code, 999);
      assert.match(JSON.parse(broken.stdout).msg, /cannot run .*no-deno.*run vpcni install again/);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("install's long details wrap at 80 columns, and only a path longer than a line overflows", () => {
  const deep = `/${"checkout/".repeat(7)}main.ts`;
  const lines = wrapDetail(`(launcher script running ${deep} from source, not compiled)`, 9);
  assert.deepEqual(lines, [
    "         (launcher script running",
    `         ${deep}`,
    "         from source, not compiled)",
  ]);
  const huge = `/${"x".repeat(100)}`;
  assert.deepEqual(wrapDetail(`(running ${huge} now)`, 9), [
    "         (running",
    `         ${huge}`,
    "         now)",
  ]);
});

Deno.test("install refuses a chain whose plugins are not in the bin dir, naming each and where to get it", async () => {
  await withDirs(async ({ root, bin, conf }) => {
    await Deno.mkdir(bin, { recursive: true });
    const args = ["install", "--bin-dir", bin, "--conflist-file", conf, "--skip-binary"];
    const refused = await vpcni([...args, "--chain", "portmap,bandwidth"]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /--chain: "portmap", "bandwidth" are not in \S+\/opt\/cni\/bin/);
    assert.match(refused.stderr, /fail every pod ADD/);
    assert.match(refused.stderr, /github\.com\/containernetworking\/plugins\/releases/);
    assert.match(refused.stderr, /--allow-missing-plugins/);
    assert.deepEqual(listDir(`${root}/etc/cni/net.d`), [], "nothing written");

    // Allowed: written, with a warning naming what is still missing (tuning is there).
    await Deno.copyFile(`${PEERS_BIN}/tuning`, `${bin}/tuning`);
    const allowed = await vpcni([
      ...args,
      "--chain",
      "portmap,tuning,bandwidth",
      "--allow-missing-plugins",
    ]);
    assert.equal(allowed.code, 0, allowed.stderr);
    assert.match(allowed.stderr, /warning: --chain: "portmap", "bandwidth" are not in /);
    assert.doesNotMatch(allowed.stderr, /"tuning"/);
    assert.deepEqual(
      JSON.parse(await Deno.readTextFile(conf)).plugins.map((p: { type: string }) => p.type),
      ["vpcni", "portmap", "tuning", "bandwidth"],
    );

    // A conflist file is checked the same way, delegated IPAM included.
    await Deno.writeTextFile(
      `${root}/ptp.json`,
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "x",
        plugins: [{ type: "ptp", ipam: { type: "vpcni", daemonSocket: "/run/vpcni/ipam.sock" } }],
      }),
    );
    const file = await vpcni([...args, "--conflist", `${root}/ptp.json`]);
    assert.equal(file.code, 2, file.stderr);
    assert.match(file.stderr, /--conflist \S+ptp\.json: "ptp" is not in /);
  });
});

Deno.test("install picks the cniVersion containerd takes, and warns when one is forced past it", async () => {
  await withDirs(async ({ root, bin, conf }) => {
    const containerd = "/usr/bin/containerd";
    const version = (await run([containerd, "--version"])).stdout;
    assert.match(
      version,
      /^containerd \S+ 1\.6\./,
      "Debian's containerd 1.6 (bash tools/dev setup)",
    );
    const args = ["install", "--bin-dir", bin, "--conflist-file", conf, "--skip-binary"];

    const auto = await vpcni([...args, "--containerd", containerd, "--json"]);
    assert.equal(auto.code, 0, auto.stderr);
    const report = JSON.parse(auto.stdout);
    assert.equal(report.cniVersion.version, "1.0.0");
    assert.match(
      report.cniVersion.why,
      /containerd 1\.6\.\d+ \(\/usr\/bin\/containerd\) takes up to 1\.0\.0/,
    );
    assert.deepEqual(report.warnings, []);
    assert.equal(JSON.parse(await Deno.readTextFile(conf)).cniVersion, "1.0.0");

    const forced = await vpcni([...args, "--containerd", containerd, "--cni-version", "1.1.0"]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(
      forced.stderr,
      /warning: --cni-version: cniVersion 1\.1\.0 is newer than containerd 1\.6\.\d+ .* 'unsupported CNI result version "1\.1\.0"'\. Use --cni-version 1\.0\.0/,
    );
    assert.equal(JSON.parse(await Deno.readTextFile(conf)).cniVersion, "1.1.0");

    // containerd 2 cannot be installed here; a stand-in prints what its --version prints.
    await Deno.writeTextFile(
      `${root}/containerd2`,
      "#!/bin/sh\necho containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7\n",
    );
    await Deno.chmod(`${root}/containerd2`, 0o755);
    const two = await vpcni([...args, "--containerd", `${root}/containerd2`, "--json"]);
    assert.equal(JSON.parse(two.stdout).cniVersion.version, "1.1.0");

    const missing = await vpcni([...args, "--containerd", `${root}/nope`]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--containerd: cannot run \S+\/nope/);
  });
});

Deno.test("containerd --version lines parse to the version, and each maps to the CNI version it takes", () => {
  assert.equal(
    parseContainerdVersion(
      "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3",
    ),
    "1.6.20",
  );
  assert.equal(
    parseContainerdVersion(
      "containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da",
    ),
    "1.7.27",
  );
  assert.equal(
    parseContainerdVersion("containerd github.com/containerd/containerd/v2 v2.0.5 fb4c30d"),
    "2.0.5",
  );
  assert.equal(parseContainerdVersion("crio version 1.30.0"), undefined);
  assert.equal(containerdNewestCni("1.5.18"), "0.4.0");
  assert.equal(containerdNewestCni("1.6.20"), "1.0.0");
  assert.equal(containerdNewestCni("1.7.27"), "1.0.0");
  assert.equal(containerdNewestCni("2.0.0"), "1.1.0");
});
