/**
 * EC2 requests per second: the vpcni simulator (`vpcni sim`, its own process) beside moto's
 * server, with the same request mix, over loopback, in one run. Two client modes: raw HTTP
 * form posts (the server's capacity) and the real `@aws-sdk/client-ec2` (what the daemon
 * sees, SigV4 and XML parsing included). Prints requests/s per server and mode and the ratio.
 *
 * ```sh
 * deno run -A bench/sim/ec2_throughput.ts [--seconds 4] [--concurrency 16] [--no-moto]
 * ```
 *
 * @module
 */
import {
  CreateNetworkInterfaceCommand,
  CreateSubnetCommand,
  CreateTagsCommand,
  CreateVpcCommand,
  DescribeInstanceTypesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";

const ROOT = new URL("../../", import.meta.url).pathname;

interface Target {
  name: string;
  endpoint: string;
  subnetId: string;
  eniId: string;
  stop: () => Promise<void>;
}

interface Result {
  target: string;
  mode: "raw" | "sdk";
  ok: number;
  failed: number;
  seconds: number;
}

function flag(name: string, def: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : def;
}

function client(endpoint: string): EC2Client {
  return new EC2Client({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts: 1,
  });
}

async function startVpcniSim(): Promise<Target> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `${ROOT}main.ts`,
      "sim",
      "--scenario",
      `${ROOT}examples/scenarios/one-node.yaml`,
      "--json",
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("vpcni sim exited before printing its endpoints");
    text += value;
  }
  const { ec2Endpoint } = JSON.parse(text.split("\n")[0]);
  const ec2 = client(ec2Endpoint);
  const subnetId = "subnet-0a1b2c3d4e5f60002";
  const eni = await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId }));
  ec2.destroy();
  return {
    name: "vpcni sim",
    endpoint: ec2Endpoint,
    subnetId,
    eniId: eni.NetworkInterface!.NetworkInterfaceId!,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await reader.cancel().catch(() => {});
    },
  };
}

async function startMoto(): Promise<Target | undefined> {
  const port = 20000 + Math.floor(Math.random() * 20000);
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("moto_server", {
      args: ["-H", "127.0.0.1", "-p", String(port)],
      stdout: "null",
      stderr: "null",
    }).spawn();
  } catch {
    console.error(
      "moto_server not found (pip install 'moto[server]'); measuring the simulator alone",
    );
    return undefined;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      const r = await fetch(`${endpoint}/moto-api/`);
      await r.body?.cancel();
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const ec2 = client(endpoint);
  const vpc = await ec2.send(new CreateVpcCommand({ CidrBlock: "10.0.0.0/16" }));
  const subnet = await ec2.send(
    new CreateSubnetCommand({
      VpcId: vpc.Vpc!.VpcId,
      CidrBlock: "10.0.16.0/20",
      AvailabilityZone: "us-east-1a",
    }),
  );
  const eni = await ec2.send(
    new CreateNetworkInterfaceCommand({ SubnetId: subnet.Subnet!.SubnetId }),
  );
  ec2.destroy();
  return {
    name: "moto_server",
    endpoint,
    subnetId: subnet.Subnet!.SubnetId!,
    eniId: eni.NetworkInterface!.NetworkInterfaceId!,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

/** The request mix: three describes the daemon makes and one mutating call. */
function rawBodies(t: Target): string[] {
  const v = "Version=2016-11-15";
  return [
    `Action=DescribeNetworkInterfaces&${v}&NetworkInterfaceId.1=${t.eniId}`,
    `Action=DescribeSubnets&${v}&SubnetId.1=${t.subnetId}`,
    `Action=CreateTags&${v}&ResourceId.1=${t.eniId}&Tag.1.Key=bench&Tag.1.Value=1`,
    `Action=DescribeInstanceTypes&${v}&InstanceType.1=m5.large`,
  ];
}

async function runRaw(t: Target, seconds: number, concurrency: number): Promise<Result> {
  const bodies = rawBodies(t);
  const deadline = performance.now() + seconds * 1000;
  let ok = 0, failed = 0, n = 0;
  const worker = async () => {
    while (performance.now() < deadline) {
      const r = await fetch(t.endpoint, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
        body: bodies[n++ % bodies.length],
      });
      await r.arrayBuffer();
      if (r.status === 200) ok++;
      else failed++;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { target: t.name, mode: "raw", ok, failed, seconds: (performance.now() - t0) / 1000 };
}

async function runSdk(t: Target, seconds: number, concurrency: number): Promise<Result> {
  const ec2 = client(t.endpoint);
  const calls = [
    () => ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [t.eniId] })),
    () => ec2.send(new DescribeSubnetsCommand({ SubnetIds: [t.subnetId] })),
    () =>
      ec2.send(
        new CreateTagsCommand({ Resources: [t.eniId], Tags: [{ Key: "bench", Value: "1" }] }),
      ),
    () => ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: ["m5.large"] })),
  ];
  const deadline = performance.now() + seconds * 1000;
  let ok = 0, failed = 0, n = 0;
  const worker = async () => {
    while (performance.now() < deadline) {
      try {
        await calls[n++ % calls.length]();
        ok++;
      } catch {
        failed++;
      }
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  ec2.destroy();
  return { target: t.name, mode: "sdk", ok, failed, seconds: (performance.now() - t0) / 1000 };
}

/** Runs the comparison and prints it; returns the results. */
export async function benchEc2Throughput(
  o: { seconds: number; concurrency: number; moto: boolean },
): Promise<Result[]> {
  const targets: Target[] = [await startVpcniSim()];
  if (o.moto) {
    const moto = await startMoto();
    if (moto) targets.push(moto);
  }
  const results: Result[] = [];
  try {
    for (const t of targets) {
      results.push(await runRaw(t, o.seconds, o.concurrency));
      results.push(await runSdk(t, o.seconds, o.concurrency));
    }
  } finally {
    for (const t of targets) await t.stop();
  }
  const rate = (r: Result) => r.ok / r.seconds;
  console.log(
    `EC2 requests/s over loopback, ${o.concurrency} concurrent clients, ${o.seconds}s each`,
  );
  console.log("server        client  requests/s  failed");
  for (const r of results) {
    console.log(
      `${r.target.padEnd(13)} ${r.mode.padEnd(7)} ${rate(r).toFixed(0).padStart(10)}  ${
        String(r.failed).padStart(6)
      }`,
    );
  }
  for (const mode of ["raw", "sdk"] as const) {
    const sim = results.find((r) => r.target === "vpcni sim" && r.mode === mode);
    const moto = results.find((r) => r.target === "moto_server" && r.mode === mode);
    if (sim && moto && rate(moto) > 0) {
      console.log(
        `ratio vpcni sim / moto_server (${mode}): ${(rate(sim) / rate(moto)).toFixed(2)}x`,
      );
    }
  }
  return results;
}

if (import.meta.main) {
  await benchEc2Throughput({
    seconds: flag("seconds", 4),
    concurrency: flag("concurrency", 16),
    moto: !Deno.args.includes("--no-moto"),
  });
}
