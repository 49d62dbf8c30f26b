// The README quickstart. Run: node examples/quickstart.mjs
// (with PANDASTACK_BASE_URL and PANDASTACK_API_KEY set, after `npm run build`).
import { PandaStack } from "@pandastack/sdk";

const client = new PandaStack(); // reads PANDASTACK_API_KEY and PANDASTACK_BASE_URL
const sandbox = await client.sandboxes.create({ template: "base", ttlSeconds: 600 });
try {
  console.log(`sandbox ${sandbox.id} (${sandbox.accel})`);

  const result = await sandbox.exec("python3 -c 'print(2 ** 10)'", { timeoutSeconds: 30 });
  console.log(result.stdout.trim(), "exit", result.exitCode); // 1024 exit 0

  // Output streams while the command runs.
  await sandbox.exec("for i in 1 2 3; do echo $i; sleep 1; done", {
    onStdout: (text) => process.stdout.write(text),
  });

  await sandbox.filesystem.write("/tmp/notes.txt", "hi");
  console.log(await sandbox.filesystem.read("/tmp/notes.txt")); // hi
} finally {
  await sandbox.kill();
}
