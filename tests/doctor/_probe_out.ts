import { startDoctorNode, DOCTOR_SUBNETS } from "../helpers/doctor_node.ts";
import { Ec2Client } from "../../aws/ec2.ts";
import { sh } from "../helpers/sh.ts";
Deno.env.set("AWS_ACCESS_KEY_ID", "test"); Deno.env.set("AWS_SECRET_ACCESS_KEY", "test");
const n = await startDoctorNode();
const ec2 = new Ec2Client({ region: "us-east-1", endpoint: n.sim.ec2Endpoint, maxAttempts: 1 });
try {
  const p = await n.addPod(); await n.addPod();
  console.log((await n.doctor(["--kubelet-max-pods", "58"])).stdout);
  await sh(["ip", "rule", "del", "priority", "1000", "to", `${p.ip}/32`, "lookup", "main"], { netns: n.node.name });
  await sh(["ip", "rule", "add", "priority", "2000", "from", "10.60.1.200/32", "lookup", "101"], { netns: n.node.name });
  await ec2.createNetworkInterface({ subnetId: DOCTOR_SUBNETS.tiny, securityGroupIds: ["sg-0d000001"], secondaryIpCount: 10 });
  await n.tryAddPod({ "vpcni.io/pool": "tiny" });
  console.log((await n.doctor(["--kubelet-max-pods", "40"])).stdout);
  console.log((await n.doctor(["datapath"])).stdout);
  console.log((await n.doctor(["enis"])).stdout);
  console.log((await n.doctor(["pods"])).stdout);
  console.log((await n.doctor(["subnets"])).stdout);
  await n.stopDaemon();
  const r = await n.doctor(["--kubelet-max-pods", "40"]); console.log(r.stdout, r.stderr);
} finally { ec2.close(); await n.close(); }
