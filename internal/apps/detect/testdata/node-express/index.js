const express = require("express");
const app = express();
app.use(express.static("public"));
app.get("/api/hello", (req, res) => res.json({ hello: "express" }));
app.listen(process.env.PORT || 3000);
