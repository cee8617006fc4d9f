#!/bin/sh
# Node bootstrap for vpcni without the DaemonSet (EC2 user data, before kubelet starts):
# installs the plugin and conflist, runs the IPAM daemon under systemd, and gives kubelet
# the max-pods value the instance's ENIs allow.
#
# Assumes the vpcni executable (deno task compile → dist/vpcni) was baked into the image
# at /usr/local/bin/vpcni. Set SERVICE_CIDR and CLUSTER_NAME for your cluster.
set -eu

VPCNI=/usr/local/bin/vpcni
SERVICE_CIDR=${SERVICE_CIDR:-10.100.0.0/16}
CLUSTER_NAME=${CLUSTER_NAME:-prod-eu1}

# The instance type, from IMDSv2.
TOKEN=$(curl -fsS -X PUT http://169.254.169.254/latest/api/token \
  -H 'X-aws-ec2-metadata-token-ttl-seconds: 60')
TYPE=$(curl -fsS -H "X-aws-ec2-metadata-token: $TOKEN" \
  http://169.254.169.254/latest/meta-data/instance-type)

# Pods take addresses from secondary ENIs only (firstInterfaceIndex: 1 below), so the
# primary ENI does not count; --cap applies kubelet's customary 110/250 ceiling.
MAX_PODS=$("$VPCNI" doctor maxpods --instance-type "$TYPE" --exclude-primary-eni --cap)

install -d -m 0755 /etc/vpcni
cat > /etc/vpcni/config.yaml <<EOF
clusterName: $CLUSTER_NAME
datapath: ipvlan-l2
pools:
  - name: default
    subnets: { tags: "zone in (internal)" }
    warmIps: 4
    warmEnis: 0
    firstInterfaceIndex: 1
EOF

# Atomic and idempotent: safe to run on every boot.
"$VPCNI" install --config /etc/vpcni/config.yaml --service-cidr "$SERVICE_CIDR"

cat > /etc/systemd/system/vpcni.service <<EOF
[Unit]
Description=vpcni IPAM daemon
After=network-online.target
Wants=network-online.target
Before=kubelet.service

[Service]
ExecStart=$VPCNI serve --config /etc/vpcni/config.yaml
Restart=always
RestartSec=2

[Install]
WantedBy=multi-user.target
EOF
systemctl daemon-reload
systemctl enable --now vpcni.service

# kubelet reads KUBELET_EXTRA_ARGS from here on Amazon Linux-style images.
echo "KUBELET_EXTRA_ARGS=--max-pods=$MAX_PODS" > /etc/sysconfig/kubelet-vpcni
echo "vpcni: installed; kubelet --max-pods=$MAX_PODS for $TYPE"
