/**
 * `vpcni install` run from the image's file tree, as the DaemonSet's init container runs it,
 * onto a simulated node (simulator, VPC fabric, daemon in the node netns): the plugin it lays
 * down works on a host without Deno, and an upgrade never leaves a window in which
 * `/opt/cni/bin/vpcni` is missing, half-written, or names a missing runtime.
 *
 * Needs root, the image's build tools (gcc, libc6-dev) and `bash tools/dev setup`.
 *
 * @module
 */
import assert from "node:assert/strict";
import { pathExists } from "../../base/path_exists.ts";
import { run, sh } from "../helpers/sh.ts";
import { buildImage, imageRuntime, otherRelease, withoutHostDeno } from "../helpers/image_tree.ts";
import { type RuntimeNode, startRuntimeNode } from "../helpers/runtime_node.ts";
import { readStamp } from "../../cli/runtime_launcher.ts";
import { inNetns } from "../../netlink/netns.ts";

function listDir(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
  } catch {
    return [];
  }
}

/** One CNI call of the installed plugin as kubelet makes it, with this machine's Deno hidden. */
async function bareCni(
  node: RuntimeNode,
  env: Record<string, string>,
  conf: Record<string, unknown>,
) {
  return await withoutHostDeno(["nsenter", `--net=${node.nodePath}`, `${node.binDir}/vpcni`], {
    env: Object.entries({ CNI_PATH: node.binDir, ...env }).map(([k, v]) => `${k}=${v}`),
    stdin: JSON.stringify(conf),
  });
}

Deno.test({
  name: "install from the image: with the image's daemon, the plugin runs VERSION, ADD and DEL " +
    "on a host without Deno; " +
    "a new version replaces it while concurrent VERSION calls all succeed; old trees go",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    assert.equal(Deno.uid(), 0, "needs root (network namespaces, mounts)");
    const tag = `vis${Deno.pid % 100000}`;
    const dir = await Deno.makeTempDir({ prefix: `${tag}-` });
    let node: RuntimeNode | undefined;
    let daemon: Deno.ChildProcess | undefined;
    const podNetns = `${tag}-p1`;
    try {
      const image = await buildImage(dir);
      const v1 = (await imageRuntime(image.root)).info.id;
      const v2 = await otherRelease(image.root, `${dir}/root2`, "0.1.1");
      const v3 = await otherRelease(image.root, `${dir}/root3`, "0.1.2");
      // The node (simulator, fabric, daemon) with the plugin installed from source; then the
      // image's install replaces the plugin, run straight from the image's file tree.
      node = await startRuntimeNode(tag);
      const installFrom = (root: string) =>
        run([
          `${root}/usr/local/bin/vpcni`,
          "install",
          "--bin-dir",
          node!.binDir,
          "--skip-conflist",
        ], {
          env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
        });
      const first = await installFrom(image.root);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, new RegExp(`runtime .*vpcni\\.d/${v1}: installed`));
      assert.match(first.stdout, /binary .*\/vpcni: installed/);
      assert.deepEqual(listDir(`${node.binDir}/vpcni.d`), [v1]);
      const again = await installFrom(image.root);
      assert.match(again.stdout, /runtime .*: unchanged/);
      assert.match(again.stdout, /binary .*: unchanged/);

      const conflist = await node.conflist();
      const conf = { ...conflist.plugins[0], name: conflist.name, cniVersion: conflist.cniVersion };

      // The daemon from the image too, as the DaemonSet's main container runs it: the node's
      // daemon (started from source) is stopped, and the image's takes over its config,
      // socket and checkpoint. Only bare environment and the credentials, as in the pod.
      const config = `${node.root}/vpcni.yaml`;
      const pids = (await run(["pgrep", "-f", `serve --config ${config}`])).stdout.trim();
      const sourceDaemons = pids.split("\n").filter((p) => p !== "").map(Number);
      assert.ok(sourceDaemons.length > 0, "the node's daemon was not found");
      for (const pid of sourceDaemons) Deno.kill(pid, "SIGTERM");
      for (let i = 0; i < 100 && sourceDaemons.some((p) => pathExists(`/proc/${p}`)); i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(!sourceDaemons.some((p) => pathExists(`/proc/${p}`)), "the node's daemon lives on");
      daemon = inNetns(node.nodePath, () =>
        new Deno.Command(`${image.root}/usr/local/bin/vpcni`, {
          args: ["serve", "--config", config],
          clearEnv: true,
          env: {
            PATH: "/usr/local/bin",
            AWS_ACCESS_KEY_ID: "demo",
            AWS_SECRET_ACCESS_KEY: "demo",
            AWS_REGION: "us-east-1",
          },
          stdin: "null",
          stdout: "null",
          stderr: "piped",
        }).spawn());
      const log = await Deno.open(`${dir}/daemon.log`, { create: true, write: true });
      daemon.stderr.pipeTo(log.writable).catch(() => {});
      const status = { ...conf, cniVersion: "1.1.0" }; // STATUS is a CNI 1.1 verb
      let ready = await bareCni(node, { CNI_COMMAND: "STATUS" }, status);
      for (let i = 0; i < 240 && ready.code !== 0; i++) {
        await new Promise((r) => setTimeout(r, 250));
        ready = await bareCni(node, { CNI_COMMAND: "STATUS" }, status);
      }
      if (ready.code !== 0) {
        const said = await Deno.readTextFile(`${dir}/daemon.log`).catch(() => "");
        assert.fail(`the image's daemon is not ready: ${ready.stdout}\n${said.slice(-2000)}`);
      }

      const version = await bareCni(node, { CNI_COMMAND: "VERSION" }, conf);
      assert.equal(version.code, 0, version.stderr);
      assert.ok(JSON.parse(version.stdout).supportedVersions.includes("1.0.0"));

      await sh(["ip", "netns", "add", podNetns]);
      const pod = {
        CNI_CONTAINERID: `${tag}pod1`,
        CNI_NETNS: `/run/netns/${podNetns}`,
        CNI_IFNAME: "eth0",
        CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ship;K8S_POD_NAME=p1",
      };
      const add = await bareCni(node, { CNI_COMMAND: "ADD", ...pod }, conf);
      assert.equal(add.code, 0, `ADD: ${add.stdout}${add.stderr}`);
      const ip = String(JSON.parse(add.stdout).ips[0].address).split("/")[0];
      assert.ok(node.whereIs(ip), `ADD returned ${ip}, which no ENI of the VPC holds`);
      const del = await bareCni(node, { CNI_COMMAND: "DEL", ...pod }, conf);
      assert.equal(del.code, 0, `DEL: ${del.stdout}${del.stderr}`);
      const exited = await Promise.race([
        daemon.status.then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), 100)),
      ]);
      assert.equal(exited, false, "the image's daemon exited");

      // Upgrade under load: VERSION calls back to back from 4 callers while v2 installs.
      let installing = true;
      const calls: { code: number; stdout: string; stderr: string }[] = [];
      const caller = async () => {
        let after = 0;
        while (installing || after++ < 3) {
          calls.push(
            await run([
              "env",
              "-i",
              "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
              "CNI_COMMAND=VERSION",
              `${node!.binDir}/vpcni`,
            ], {
              stdin: '{"cniVersion":"1.0.0"}',
            }),
          );
        }
      };
      // Between those, the files as an exec would find them, sampled as fast as they can be
      // read: the launcher whole, and every file of the tree it names there at full size.
      const bin = node.binDir;
      const launcherSize = Deno.statSync(`${bin}/vpcni`).size;
      const denoSize = Deno.statSync(`${bin}/vpcni.d/${v1}/deno`).size;
      const seen: string[] = [];
      let looks = 0;
      const observer = async () => {
        while (installing) {
          looks++;
          try {
            const launcher = await Deno.readFile(`${bin}/vpcni`);
            const stamp = readStamp(launcher);
            if (!stamp || launcher.length !== launcherSize) {
              seen.push(`launcher of ${launcher.length} bytes`);
              continue;
            }
            for (const f of ["vpcni.js", "vpcni-plugin.js", "runtime.json"]) {
              Deno.statSync(`${bin}/${stamp.runtimeDir}/${f}`);
            }
            const size = Deno.statSync(`${bin}/${stamp.runtimeDir}/deno`).size;
            if (size !== denoSize) seen.push(`${stamp.runtimeDir}/deno of ${size} bytes`);
          } catch (e) {
            seen.push((e as Error).message);
          }
        }
      };
      const callers = [caller(), caller(), caller(), caller(), observer()];
      const upgrade = await installFrom(`${dir}/root2`);
      installing = false;
      await Promise.all(callers);
      console.log(`${looks} looks at the files during the upgrade, ${seen.length} bad`);
      assert.deepEqual(seen.slice(0, 5), [], "a missing or partial file was visible");
      assert.equal(upgrade.code, 0, upgrade.stderr);
      assert.match(upgrade.stdout, new RegExp(`runtime .*vpcni\\.d/${v2}: installed`));
      const failed = calls.filter((c) =>
        c.code !== 0 || !c.stdout.includes('"cniVersion":"1.0.0"')
      );
      console.log(`${calls.length} VERSION calls during the upgrade, ${failed.length} failed`);
      assert.ok(calls.length >= 12, `only ${calls.length} calls`);
      assert.deepEqual(failed, [], "a call failed while the launcher was switched");
      const v = await run([`${node.binDir}/vpcni`, "version", "--json"], { env: {} });
      assert.equal(JSON.parse(v.stdout).version, "0.1.1");
      // The replaced tree stays one install long, for calls that started on it.
      assert.deepEqual(listDir(`${node.binDir}/vpcni.d`), [v1, v2].sort());

      const third = await installFrom(`${dir}/root3`);
      assert.match(third.stdout, new RegExp(`runtime .*vpcni\\.d/${v1}: removed`));
      assert.deepEqual(listDir(`${node.binDir}/vpcni.d`), [v2, v3].sort());
      assert.deepEqual(listDir(node.binDir), ["vpcni", "vpcni.d"]);

      // A launcher whose runtime tree is gone answers a runtime with the spec's error JSON.
      await Deno.rename(`${node.binDir}/vpcni.d/${v3}`, `${dir}/moved`);
      const broken = await run(["env", "-i", "CNI_COMMAND=VERSION", `${node.binDir}/vpcni`], {
        stdin: '{"cniVersion":"1.0.0"}',
      });
      assert.notEqual(broken.code, 0);
      const err = JSON.parse(broken.stdout);
      assert.equal(err.code, 999);
      assert.match(
        err.msg,
        new RegExp(`cannot run \\S+vpcni\\.d/${v3}/deno: .*run vpcni install again`),
      );
    } finally {
      if (daemon) {
        daemon.kill("SIGTERM");
        await daemon.status;
      }
      await run(["ip", "netns", "del", podNetns]);
      await node?.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
